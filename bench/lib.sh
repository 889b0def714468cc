#!/usr/bin/env bash
# Shared by the benchmark scripts (sourced): a fresh migrated database, N orders with one
# pending payment receipt each, the benchmark configuration, and starting the binaries.
# Every process started is recorded in `bench_pids` and killed by `bench_cleanup`.

bench_admin_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
bench_bin="${CARGO_TARGET_DIR:-target}/release"
bench_work=$(mktemp -d)
bench_pids=()
# The dev-sink the dispatcher benchmark delivers to (run.sh starts it on this port).
bench_sink_port=18181
bench_secret="whsec_bench_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export BENCH_STRIPE_SECRET="$bench_secret"
# psql and pgbench sessions see inbound's tables and the example domain's unqualified.
export PGOPTIONS="-c search_path=inbound,inbound_example"

bench_cleanup() {
  for pid in "${bench_pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$bench_work"
}

# bench_db NAME: drops and recreates database NAME, migrates it, prints its URL.
bench_db() {
  psql -q "$bench_admin_url" -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >/dev/null
  # The stock worker's migrate: inbound's schema and the reference domain's.
  "$bench_bin/inbound-worker" migrate --database-url "${bench_admin_url%/*}/$1" >/dev/null
  echo "${bench_admin_url%/*}/$1"
}

# bench_seed_pending URL N [FIRST]: orders oFIRST..o(FIRST+N-1) awaiting payment and one
# pending ~1 KB payment_intent.succeeded receipt for each.
bench_seed_pending() {
  local first="${3:-1}"
  psql -Atq "$1" -c "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency)
       SELECT 'bench', 'o' || n, 'pi_' || n, 2000, 'usd' FROM generate_series($first, $first + $2 - 1) n" \
    -c "WITH inserted AS (
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, payload)
         SELECT 'stripe-bench', 'stripe-bench/platform/test', 'evt_' || n, 'payment_intent.succeeded',
                'payment_intent.succeeded',
                jsonb_build_object('id', 'evt_' || n, 'type', 'payment_intent.succeeded', 'livemode', false,
                  'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || n, 'object', 'payment_intent',
                    'status', 'succeeded', 'amount_received', 2000, 'currency', 'usd',
                    'metadata', jsonb_build_object('order_id', 'o' || n, 'note', repeat('x', 700)))))
         FROM generate_series($first, $first + $2 - 1) n
         RETURNING id, integration, received_at, octet_length(payload::text) AS bytes)
       INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes)
       SELECT id, integration, received_at, received_at, bytes FROM inserted" -c "VACUUM ANALYZE" >/dev/null
}

# The benchmark integration: Stripe, payments routed to orders.mark_paid; a sink for the
# dispatcher benchmark on port $1.
bench_config() {
  cat > "$bench_work/config.toml" <<TOML
[[integration]]
id = "stripe-bench"
provider = "stripe"
tenant = "bench"
secrets = ["env:BENCH_STRIPE_SECRET"]
expect = { livemode = false }
[integration.routes]
"payment_intent.succeeded" = { handler = "orders.mark_paid" }

[[sink]]
id = "bench-sink"
url = "http://127.0.0.1:$bench_sink_port/effects"
idempotency_header = "Idempotency-Key"
# The dispatcher benchmark measures one sink with every slot (the default is half).
max_concurrency = 32
TOML
  echo "$bench_work/config.toml"
}

# bench_start_ingress URL PORT METRICS_PORT: sets bench_ingress_pid once it is ready.
bench_start_ingress() {
  RUST_LOG=warn "$bench_bin/inbound-ingress" --config "$(bench_config)" --database-url "$1" \
    --listen "127.0.0.1:$2" --metrics-listen "127.0.0.1:$3" --log-format json \
    2>>"$bench_work/ingress.log" &
  bench_ingress_pid=$!
  bench_pids+=("$bench_ingress_pid")
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$2/readyz" >/dev/null && return; sleep 0.2; done
  echo "the ingress did not become ready" >&2
  return 1
}

# bench_load PORT CONNECTIONS SECONDS [RATE] [INTEGRATION] [PID]: signed Stripe load (to
# stripe-bench unless INTEGRATION names another), prints the loadgen's JSON; with PID, that
# includes the CPU process PID used during the timed window (`cpu_ticks`).
bench_load() {
  LOADGEN_STRIPE_SECRET="$bench_secret" "$bench_bin/inbound-loadgen" --addr "127.0.0.1:$1" \
    --connections "$2" --rate "${4:-0}" --duration-secs "$3" --integration "${5:-stripe-bench}" \
    --events-per-connection "${BENCH_EVENTS_PER_CONNECTION:-20000}" ${6:+--cpu-of "$6"}
}

# bench_start_worker URL METRICS_PORT WORKER_ID FLAGS…: sets bench_worker_pid.
bench_start_worker() {
  local url="$1" port="$2" id="$3"
  shift 3
  RUST_LOG=warn "$bench_bin/inbound-worker" --config "$(bench_config)" --database-url "$url" \
    --metrics-listen "127.0.0.1:$port" --worker-id "$id" --poll-interval-ms 20 \
    --log-format json "$@" >/dev/null 2>>"$bench_work/worker.log" &
  bench_worker_pid=$!
  bench_pids+=("$bench_worker_pid")
}

# bench_record FILE KEY VALUE: sets KEY to VALUE (a string) in the JSON object in FILE.
bench_record() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
path, key, value = sys.argv[1:4]
data = json.load(open(path))
data[key] = value
json.dump(data, open(path, "w"))
PY
}

bench_now() { date +%s.%N; }
bench_rss_mib() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
bench_commits() { psql -Atq "$1" -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
bench_json() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

# bench_seconds_until_done URL PENDING_SQL LAST_SQL STARTED: waits until PENDING_SQL reads
# 0, then prints the seconds from STARTED (bench_now) to LAST_SQL, an epoch the database
# recorded (when the last item finished). It polls twice a second: each psql is a new
# connection, and at 20 polls a second their start-ups took ~10 % of the CPU the
# measured binary and PostgreSQL share (pgbench's ceilings pay no such tax).
bench_seconds_until_done() {
  while [ "$(psql -Atq "$1" -c "$2")" != 0 ]; do sleep 0.5; done
  python3 -c "print($(psql -Atq "$1" -c "$3") - $4)"
}

# bench_drain URL: waits until the queue is empty; prints the seconds it took.
bench_drain() {
  local started
  started=$(bench_now)
  while [ "$(psql -Atq "$1" -c "SELECT count(*) FROM receipt_queue")" != 0 ]; do sleep 0.05; done
  python3 -c "print($(bench_now) - $started)"
}
