#!/usr/bin/env bash
# `make bench-forgery` (and part of `make bench`): the ingress's CPU per forged request of
# each signature scheme, at the largest head (16 KiB) and body (1 MiB, the default
# max_body_bytes) the defaults allow, and at the red team's 60 KB body. Each integration
# holds one secret (Standard Webhooks `v1a`: one secret and one public key), as a default
# configuration does. A benchmark, not a test.
#
# usage: bench/forgery.sh [RESULTS.json]   (records into RESULTS.json when given)
#        BENCH_COMPARE_BIN_DIR=DIR also measures the ingress there (an older build), scheme
#        by scheme beside this one, recorded with the suffix _before.
#        BENCH_FORGERY_SCHEMES, BENCH_FORGERY_BODIES narrow the run (space-separated).
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-}"
DATABASE_URL=$(scripts/ensure-postgres.sh)
export DATABASE_URL
cargo build --quiet --release -p inbound-ingress -p inboundctl -p inbound-stock-worker
cargo build --quiet --release -p inbound-programs --bin inbound-forgery
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap bench_cleanup EXIT
forgery="$bench_bin/inbound-forgery"
seconds="${BENCH_FORGERY_SECONDS:-3}"
record() {
  echo "bench-forgery: $1 = $2" >&2
  [ -z "$results" ] || bench_record "$results" "$1" "$2"
}

# RFC 8032's first test key: any valid point will do, nothing is ever signed with it.
public_key="whpk_$(python3 -c 'import base64, binascii; print(base64.b64encode(binascii.unhexlify("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")).decode())')"
export FORGED_SECRET="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" FORGED_PUBLIC_KEY="$public_key"
config="$bench_work/forgery.toml"
for provider in stripe github slack shopify paddle zoom standard; do
  printf '[[integration]]\nid = "forged-%s"\nprovider = "%s"\ntenant = "bench"\nsecrets = ["env:FORGED_SECRET"]\n\n' \
    "$provider" "$provider" >> "$config"
done
cat >> "$config" <<'TOML'
[[integration]]
id = "forged-standard-v1a"
provider = "standard"
tenant = "bench"
secrets = ["env:FORGED_SECRET", "env:FORGED_PUBLIC_KEY"]

[[integration]]
id = "forged-token"
provider = "token"
tenant = "bench"
secrets = ["env:FORGED_SECRET"]
[integration.token]
header = "x-forged-token"
[integration.fields]
event_id = { pointer = "/id" }
event_type = { pointer = "/type" }
TOML
for algorithm in sha256 sha512; do
  cat >> "$config" <<TOML

[[integration]]
id = "forged-hmac-$algorithm"
provider = "hmac"
tenant = "bench"
secrets = ["env:FORGED_SECRET"]
[integration.hmac]
header = "x-forged-signature"
prefix = "v1="
separator = ","
algorithm = "$algorithm"
encoding = "base64"
signed = "{timestamp}.{body}"
timestamp_header = "x-forged-timestamp"
[integration.fields]
event_id = { pointer = "/id" }
event_type = { pointer = "/type" }
TOML
done

# bench_forgery_ingress BIN_DIR PORT: a migrated database of its own and an ingress from
# BIN_DIR on PORT; prints its pid (the ingress's own output goes elsewhere: it would hold
# the caller's command substitution open).
bench_forgery_ingress() {
  local url
  url=$(bench_bin="$1" bench_db "inbound_bench_forgery_$2")
  RUST_LOG=warn "$1/inbound-ingress" --config "$config" --database-url "$url" \
    --listen "127.0.0.1:$2" --metrics-listen "127.0.0.1:$(($2 + 1000))" --log-format json \
    >/dev/null 2>>"$bench_work/ingress-$2.log" &
  local pid=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$2/readyz" >/dev/null && break; sleep 0.2; done
  echo "$pid"
}

# The build measured, and (BENCH_COMPARE_BIN_DIR) an older one beside it, scheme by scheme.
ports=(18095)
suffixes=("")
pids=("$(bench_forgery_ingress "$bench_bin" 18095)")
if [ -n "${BENCH_COMPARE_BIN_DIR:-}" ]; then
  ports+=(18097)
  suffixes+=("_before")
  pids+=("$(bench_forgery_ingress "$BENCH_COMPARE_BIN_DIR" 18097)")
fi
bench_pids+=("${pids[@]}")

schemes="${BENCH_FORGERY_SCHEMES:-stripe github slack shopify paddle zoom standard standard-v1a standard-v1a-170 hmac-sha256 hmac-sha512 token}"
for body in ${BENCH_FORGERY_BODIES:-1048576 61440}; do
  for scheme in $schemes; do
    for index in "${!ports[@]}"; do
      report=$("$forgery" --addr "127.0.0.1:${ports[$index]}" --cpu-of "${pids[$index]}" \
        --body-bytes "$body" --seconds "$seconds" --scheme "$scheme")
      read -r ms statuses < <(python3 - "$report" "$scheme" <<'PY'
import json, sys
scheme = json.loads(sys.argv[1])["schemes"][sys.argv[2]]
statuses = ",".join(f"{status}x{count}" for status, count in scheme["statuses"].items())
print(f"{scheme['cpu_ms_per_request']:.3f}", statuses)
PY
)
      record "forged_${scheme//-/_}_${body}_ms${suffixes[$index]}" "$ms"
      record "forged_${scheme//-/_}_${body}_answers${suffixes[$index]}" "$statuses"
    done
  done
done
