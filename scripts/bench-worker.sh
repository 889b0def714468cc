#!/usr/bin/env bash
# `make bench-worker`: receipts applied per second by the real worker (claim +
# orders.mark_paid + done, durable) with N pending receipts, at --concurrency 8 and 32;
# the time from SIGKILL of a loaded worker until every receipt it had claimed is done by
# another; and effects delivered per second to a local sink answering 200 at
# --effect-concurrency 32. A benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

receipts="${BENCH_RECEIPTS:-20000}"
lease_secs="${BENCH_LEASE_SECS:-5}"
admin_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
bench_url="${admin_url%/*}/inbound_bench_worker"
scripts/ensure-postgres.sh
cargo build --quiet --release -p inbound-worker -p inboundctl
sink_port=18181
bin=target/release
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

secret="whsec_bench_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cat > "$work/config.toml" <<TOML
[[integration]]
id = "stripe-bench"
provider = "stripe"
tenant = "bench"
secrets = ["env:BENCH_STRIPE_SECRET"]
[integration.routes]
"payment_intent.succeeded" = { handler = "orders.mark_paid" }

[[sink]]
id = "bench-sink"
url = "http://127.0.0.1:$sink_port/effects"
idempotency_header = "Idempotency-Key"
TOML
export BENCH_STRIPE_SECRET="$secret"

sql() { psql -Atq "$bench_url" -c "$1"; }

seed() { # a fresh database with $receipts orders and one pending receipt each
  psql -q "$admin_url" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS inbound_bench_worker WITH (FORCE)" -c "CREATE DATABASE inbound_bench_worker" >/dev/null
  "$bin/inboundctl" migrate --database-url "$bench_url" >/dev/null
  sql "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency)
       SELECT 'bench', 'o' || n, 'pi_' || n, 2000, 'usd' FROM generate_series(1, $receipts) n"
  sql "WITH inserted AS (
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, payload)
         SELECT 'stripe-bench', 'stripe-bench/platform/test', 'evt_' || n, 'payment_intent.succeeded',
                'payment_intent.succeeded',
                jsonb_build_object('id', 'evt_' || n, 'type', 'payment_intent.succeeded', 'livemode', false,
                  'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || n, 'object', 'payment_intent',
                    'status', 'succeeded', 'amount_received', 2000, 'currency', 'usd',
                    'metadata', jsonb_build_object('order_id', 'o' || n, 'note', repeat('x', 700)))))
         FROM generate_series(1, $receipts) n
         RETURNING id, integration, received_at)
       INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at)
       SELECT id, integration, received_at, received_at FROM inserted"
  sql "VACUUM ANALYZE" >/dev/null
}

started_pid=""
start_worker() { # concurrency worker-id metrics-port; sets started_pid
  RUST_LOG=warn "$bin/inbound-worker" --config "$work/config.toml" --database-url "$bench_url" \
    --metrics-listen "127.0.0.1:$3" --concurrency "$1" --worker-id "$2" --lease-secs "$lease_secs" \
    --poll-interval-ms 20 --log-format json >/dev/null 2>>"$work/worker.log" &
  started_pid=$!
  pids+=("$started_pid")
}

now() { date +%s.%N; }
wait_until_empty() { while [ "$(sql "SELECT count(*) FROM receipt_queue")" != 0 ]; do sleep 0.05; done; }

declare -A rate rss commits
for concurrency in 8 32; do
  seed
  commits_before=$(sql "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
  started=$(now)
  start_worker "$concurrency" "bench-$concurrency" 19191
  pid=$started_pid
  wait_until_empty
  elapsed=$(python3 -c "print($(now) - $started)")
  rss[$concurrency]=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  commits_after=$(sql "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
  applied=$(sql "SELECT count(*) FROM receipts WHERE outcome = 'applied'")
  [ "$applied" = "$receipts" ] || { echo "only $applied of $receipts applied" >&2; exit 1; }
  rate[$concurrency]=$(python3 -c "print(round($receipts / $elapsed))")
  commits[$concurrency]=$(python3 -c "print(round(($commits_after - $commits_before) / $receipts, 2))")
done

# Recovery: kill a loaded worker; another takes over its claims when their leases expire.
seed
start_worker 32 bench-victim 19192
victim=$started_pid
while [ "$(sql "SELECT count(*) FROM receipts WHERE status = 'done'")" -lt $((receipts / 4)) ]; do sleep 0.05; done
kill -KILL "$victim"; killed_at=$(now)
wait "$victim" 2>/dev/null || true
sql "CREATE TABLE orphaned AS SELECT receipt_id FROM receipt_queue WHERE leased_by = 'bench-victim' AND visible_at > now()"
orphaned=$(sql "SELECT count(*) FROM orphaned")
start_worker 32 bench-successor 19193
while [ "$(sql "SELECT count(*) FROM orphaned o JOIN receipts r ON r.id = o.receipt_id WHERE r.status <> 'done'")" != 0 ]; do sleep 0.05; done
recovered=$(python3 -c "print(round($(now) - $killed_at, 2))")
wait_until_empty
double=$(sql "SELECT count(*) FROM receipts WHERE outcome = 'applied'")

# Dispatcher: every receipt done, one pending effect each, a local sink answering 200.
seed
sql "WITH done AS (DELETE FROM receipt_queue RETURNING receipt_id)
     UPDATE receipts SET status = 'done', outcome = 'applied', finished_at = now() FROM done WHERE id = done.receipt_id"
sql "INSERT INTO effects (receipt_id, operation_key, sink, kind, tenant, data, event)
     SELECT id, 'order.paid:bench:' || id, 'bench-sink', 'order.paid', 'bench',
            jsonb_build_object('order_id', 'o' || id), jsonb_build_object('integration', 'stripe-bench', 'id', event_id, 'type', event_type)
     FROM receipts"
"$bin/inboundctl" dev-sink --listen "127.0.0.1:$sink_port" >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
started=$(now)
RUST_LOG=warn "$bin/inbound-worker" --config "$work/config.toml" --database-url "$bench_url" \
  --metrics-listen 127.0.0.1:19194 --effect-concurrency 32 --worker-id bench-dispatch \
  --poll-interval-ms 20 --log-format json >/dev/null 2>>"$work/worker.log" &
dispatcher=$!
pids+=("$dispatcher")
while [ "$(sql "SELECT count(*) FROM effects WHERE status <> 'completed'")" != 0 ]; do sleep 0.05; done
delivered_rate=$(python3 -c "print(round($receipts / ($(now) - $started)))")
dispatch_rss=$(awk '/VmHWM/ { print $2 }' "/proc/$dispatcher/status")
attempts=$(sql "SELECT count(*) FROM effect_attempts")

cat <<TABLE
| measure | value |
|---|---|
| worker receipts/s, --concurrency 8, $receipts pending | ${rate[8]} /s (peak RSS $(( ${rss[8]} / 1024 )) MiB, ${commits[8]} commits per receipt) |
| worker receipts/s, --concurrency 32, $receipts pending | ${rate[32]} /s (peak RSS $(( ${rss[32]} / 1024 )) MiB, ${commits[32]} commits per receipt) |
| SIGKILL of a loaded worker (--lease-secs $lease_secs) → its $orphaned claimed receipts done by another | ${recovered} s |
| orders applied after the kill (must equal $receipts) | $double |
| effects delivered/s to a local 200 sink, --effect-concurrency 32 | ${delivered_rate} /s (peak RSS $(( dispatch_rss / 1024 )) MiB, $attempts attempts for $receipts effects) |
TABLE
