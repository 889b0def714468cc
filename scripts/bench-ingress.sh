#!/usr/bin/env bash
# `make bench-ingress`: the ingress beside its ceiling, in one run on the same PostgreSQL.
#   ceiling: pgbench, one INSERT … ON CONFLICT DO NOTHING of a ~1 KB receipt per
#            transaction, -c 32, into a copy of the receipts table;
#   ingress: accepted receipts/s through HTTP with valid Stripe signatures (20 %
#            redeliveries) at 32 and 128 connections, then p50/p99 at half the peak rate;
#   plus the ingress's peak RSS and commits per accepted receipt.
# A benchmark, not a test: figures depend on the machine; compare the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${BENCH_SECONDS:-15}"
admin_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
bench_url="${admin_url%/*}/inbound_bench"
scripts/ensure-postgres.sh

cargo build --quiet --release -p inbound-ingress -p inboundctl
cargo build --quiet --release -p inbound-tests --bin inbound-loadgen
bin=target/release
work=$(mktemp -d)
ingress_pid=""
cleanup() {
  [ -n "$ingress_pid" ] && kill "$ingress_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

psql -q "$admin_url" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS inbound_bench WITH (FORCE)" -c "CREATE DATABASE inbound_bench" >/dev/null
"$bin/inboundctl" migrate --database-url "$bench_url" >/dev/null
psql -q "$bench_url" -c "CREATE TABLE bench_receipts (LIKE receipts INCLUDING ALL)" >/dev/null

commits() { psql -Atq "$bench_url" -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'inbound_bench'"; }

# --- ceiling: pgbench ----------------------------------------------------------------------
payload=$(printf '{"id":"evt","object":"event","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount_received":2000,"currency":"usd","metadata":{"order_id":"order_1","note":"%s"}}}}' "$(printf 'x%.0s' $(seq 1 800))")
cat > "$work/insert.sql" <<SQL
\set n random(1, 2000000000)
INSERT INTO bench_receipts (integration, source_scope, event_id, event_type, route_key, payload)
VALUES ('stripe-bench', 'stripe-bench/platform/test', 'evt_' || :n, 'payment_intent.succeeded',
        'payment_intent.succeeded', '$payload'::jsonb)
ON CONFLICT (source_scope, event_id) DO NOTHING;
SQL
ceiling_tps=$(pgbench -n -c 32 -j 2 -T "$seconds" -f "$work/insert.sql" "$bench_url" \
  | awk '/^tps = / { print $3; exit }')

# --- ingress ---------------------------------------------------------------------------------
secret="whsec_bench_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cat > "$work/config.toml" <<TOML
[[integration]]
id = "stripe-bench"
provider = "stripe"
tenant = "bench"
secrets = ["env:BENCH_STRIPE_SECRET"]
[integration.routes]
"payment_intent.succeeded" = { handler = "orders.mark_paid" }
TOML
BENCH_STRIPE_SECRET="$secret" RUST_LOG=warn "$bin/inbound-ingress" --config "$work/config.toml" \
  --database-url "$bench_url" --listen 127.0.0.1:18080 --metrics-listen 127.0.0.1:19090 \
  --log-format json 2>"$work/ingress.log" &
ingress_pid=$!
for _ in $(seq 1 50); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.2; done

load() { # connections [rate]
  LOADGEN_STRIPE_SECRET="$secret" "$bin/inbound-loadgen" --addr 127.0.0.1:18080 \
    --connections "$1" --rate "${2:-0}" --duration-secs "$seconds" --events-per-connection 20000
}
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

commits_before=$(commits)
run32=$(load 32)
commits_after=$(commits)
run128=$(load 128)
peak=$(python3 -c "import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))" \
  "$(field "$run32" requests_per_sec)" "$(field "$run128" requests_per_sec)")
half_rate=$(python3 -c "print(int($peak / 2))")
run_half=$(load 32 "$half_rate")
rss_kib=$(awk '/VmHWM/ { print $2 }' "/proc/$ingress_pid/status")

accepted32=$(field "$run32" accepted_per_sec)
python3 - "$ceiling_tps" "$run32" "$run128" "$run_half" "$rss_kib" "$commits_before" "$commits_after" <<'PY'
import json, sys
ceiling = float(sys.argv[1]); r32, r128, half = (json.loads(a) for a in sys.argv[2:5])
rss_mib = int(sys.argv[5]) / 1024
commits = int(sys.argv[7]) - int(sys.argv[6])
requests32 = r32["accepted"] + r32["duplicate"]
print("| measure | value | ratio to ceiling |")
print("|---|---|---|")
print(f"| ceiling: pgbench single-row INSERT … ON CONFLICT, -c 32 | {ceiling:.0f} tx/s | 1.00 |")
for name, run in (("32", r32), ("128", r128)):
    print(f"| ingress accepted/s, {name} connections (20 % redeliveries) | {run['accepted_per_sec']:.0f} /s "
          f"(all answers {run['requests_per_sec']:.0f} /s, 503: {run['unavailable_503']}, errors: {run['connection_errors']}) "
          f"| {run['accepted_per_sec'] / ceiling:.2f} |")
print(f"| latency at {half['rate_target']} req/s (half the peak), 32 connections | p50 {half['p50_ms']:.1f} ms, p99 {half['p99_ms']:.1f} ms | |")
print(f"| ingress peak RSS | {rss_mib:.1f} MiB | |")
print(f"| commits per request at 32 connections | {commits / max(requests32, 1):.2f} | |")
PY
