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

# bench_seed_pending URL N [FIRST] [SUBJECTS]: orders oFIRST..o(FIRST+N-1) awaiting payment
# and one pending ~1 KB payment_intent.succeeded receipt for each (with its payload and
# queue row).
bench_seed_pending() {
  local first="${3:-1}" subjects="${4:-0}"
  # With SUBJECTS, every receipt is ordered (as an `ordered = true` route accepts it), its
  # subject one of SUBJECTS, its place in the subject's order its number.
  local subject="NULL::text" ordered=false
  if [ "$subjects" -gt 0 ]; then subject="'subj_' || (n % $subjects)" ordered=true; fi
  psql -Atq "$1" -c "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency)
       SELECT 'bench', 'o' || n, 'pi_' || n, 2000, 'usd' FROM generate_series($first, $first + $2 - 1) n" \
    -c "WITH input AS (
         SELECT n, $subject AS subject, jsonb_build_object('id', 'evt_' || n, 'type', 'payment_intent.succeeded', 'livemode', false,
                  'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || n, 'object', 'payment_intent',
                    'status', 'succeeded', 'amount_received', 2000, 'currency', 'usd',
                    'metadata', jsonb_build_object('order_id', 'o' || n, 'note', repeat('x', 700))))) AS payload
         FROM generate_series($first, $first + $2 - 1) n
       ), inserted AS (
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, subject, ordered)
         SELECT 'stripe-bench', 'stripe-bench/platform/test', 'evt_' || n, 'payment_intent.succeeded',
                'payment_intent.succeeded', subject, $ordered
         FROM input ORDER BY n
         RETURNING id, integration, event_id, received_at, subject
       ), stored AS (
         INSERT INTO receipt_payloads (receipt_id, payload)
         SELECT inserted.id, input.payload FROM inserted JOIN input ON inserted.event_id = 'evt_' || input.n
       )
       INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes,
                                  subject, ordered_at)
       SELECT inserted.id, inserted.integration, inserted.received_at, inserted.received_at,
              octet_length(input.payload::text), inserted.subject,
              CASE WHEN $ordered THEN inserted.received_at + input.n * interval '1 microsecond' END
       FROM inserted JOIN input ON inserted.event_id = 'evt_' || input.n" -c "VACUUM ANALYZE" >/dev/null
}

# bench_seed_history URL RECEIPTS PENDING EFFECTS [SPARSE]: a history as the ingress and workers
# leave it — RECEIPTS receipts of 5 integrations accepted evenly over the last 90 days
# (ids of their days, in their day's and key period's partitions, each with its key, a
# ~400-byte payload, its own subject and an event time — but every 5,000th is about one
# subject of stripe-live, `cus_hot`, the timeline benchmark's), done except every 2,000th
# failed and every 10,000th quarantined, the newest PENDING still queued (a backlog), audit rows, and EFFECTS effects of the oldest
# receipts (3 sinks, 3,600 open or in review, one attempt each). Receipt n's id is its day's
# times 10^10 plus 1,000,000 + n, so `id % 2000` picks every 2,000th. SPARSE (1 by
# default) divides the failed, quarantined and open ones by that much: a history whose
# people keep up, for retention (which refuses a partition that keeps more than 10,000).
bench_seed_history() {
  local url="$1" receipts="$2" pending="$3" effects="$4" sparse="${5:-1}"
  local db=(psql -Atq -v ON_ERROR_STOP=1 "$url")
  local t0 step_us
  t0=$("${db[@]}" -c "SELECT now()")
  step_us=$(( 90 * 86400 * 1000000 / receipts ))
  # n's acceptance time and id, as SQL over a column n.
  local at="(timestamptz '$t0' - ($receipts - n) * interval '$step_us microseconds')"
  local id="(history_day($at)::int8 * 10000000000 + 1000000 + n)"
  "${db[@]}" -c "SELECT ensure_history_partitions(timestamptz '$t0' - interval '91 days', 98)" >/dev/null
  local batch=1000000 first last
  for ((first = 1; first <= receipts; first += batch)); do
    last=$((first + batch - 1 < receipts ? first + batch - 1 : receipts))
    "${db[@]}" -c "INSERT INTO receipts (id, integration, source_scope, event_id, event_type, route_key,
                                        status, outcome, attempts, received_at, finished_at,
                                        subject, event_at)
         SELECT $id, i, i || '/acct_' || (n % 7) || '/live', 'evt_' || n, t, t,
                'done', 'applied', 1, $at, $at,
                CASE WHEN n % 5000 = 0 THEN 'cus_hot' ELSE 'pi_' || n END, $at - interval '1 second'
         FROM generate_series($first, $last) n,
              LATERAL (SELECT (ARRAY['stripe-live', 'stripe-eu', 'github-app', 'shopify-shop', 'slack-app'])[1 + n % 5] AS i,
                              (ARRAY['payment_intent.succeeded', 'charge.refunded', 'invoice.paid',
                                     'customer.subscription.updated'])[1 + n % 4] AS t) x" \
      -c "INSERT INTO receipt_payloads (receipt_id, payload)
         SELECT $id, jsonb_build_object('id', 'evt_' || n, 'type', 'payment_intent.succeeded', 'livemode', true,
                  'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || n,
                    'object', 'payment_intent', 'status', 'succeeded', 'amount_received', 2000,
                    'currency', 'usd', 'metadata', jsonb_build_object('order_id', 'o' || n,
                    'note', repeat('x', 200)))))
         FROM generate_series($first, $last) n" \
      -c "INSERT INTO receipt_keys (period, source_scope, event_id, integration)
         SELECT key_period($at), i || '/acct_' || (n % 7) || '/live', 'evt_' || n, i
         FROM generate_series($first, $last) n,
              LATERAL (SELECT (ARRAY['stripe-live', 'stripe-eu', 'github-app', 'shopify-shop', 'slack-app'])[1 + n % 5] AS i) x"
  done
  # New receipts take serials above the seeded ones (today's ids must not meet them).
  "${db[@]}" -c "SELECT setval('receipt_serials', 1000000 + $receipts + 1)" \
    -c "UPDATE receipts SET status = 'failed', outcome = NULL, attempts = 8,
         last_error = (ARRAY['order does not exist', 'handler timed out', 'deadlock detected'])[1 + id % 3]
       WHERE id % (2000 * $sparse) = 7" \
    -c "UPDATE receipts SET status = 'quarantined', outcome = NULL,
         outcome_reason = (ARRAY['PaymentIntent does not pay its order: the amount differs',
                                 'invoice has no customer'])[1 + id % 2]
       WHERE id % (10000 * $sparse) = 11" \
    -c "WITH queued AS (
         UPDATE receipts SET status = 'pending', outcome = NULL, finished_at = NULL
         WHERE id % 10000000000 > 1000000 + $receipts - $pending
           AND id >= history_day(timestamptz '$t0' - ($pending + 1) * interval '$step_us microseconds')::int8 * 10000000000
         RETURNING id, integration, received_at)
       INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes, leased_by, last_error)
       SELECT id, integration,
              CASE WHEN id % 10 = 0 THEN now() + interval '5 min' ELSE received_at END, received_at, 400,
              CASE WHEN id % 20 = 0 THEN 'worker-1' END,
              CASE WHEN id % 10 = 0 AND id % 20 <> 0 THEN 'order does not exist' END
       FROM queued" \
    -c "INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason)
       SELECT id, 'failed', 'alice', 'fixed' FROM receipts WHERE id % 4000 = 7" \
    -c "INSERT INTO receipt_resolutions (receipt_id, previous_status, action, resolved_by, reason)
       SELECT id, 'failed', 'close', 'bob', 'test event' FROM receipts WHERE id % 8000 = 7" >/dev/null
  if [ "$effects" -gt 0 ]; then
    "${db[@]}" -c "INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event, status,
                           attempts, visible_at, created_at, completed_at, last_error, maybe_delivered)
       SELECT $id - 1000000, $id, 'order.paid:o' || n || ':pi_' || n, (ARRAY['fulfillment', 'audit', 'crm'])[1 + n % 3],
              'order.paid', 'acme', jsonb_build_object('order_id', 'o' || n), '{}',
              s, 1, now(), $at,
              CASE WHEN s = 'completed' THEN $at END,
              CASE WHEN s IN ('review', 'failed') THEN (ARRAY['HTTP 302: redirects are never followed',
                   'HTTP 422: unknown order', 'timed out after 10 s; no status_url'])[1 + n % 3] END,
              s IN ('review', 'uncertain')
       FROM generate_series(1, $effects) n,
            LATERAL (SELECT CASE WHEN n % (1000 * $sparse) = 3 THEN 'review'
                                 WHEN n % (2000 * $sparse) = 5 THEN 'failed'
                                 WHEN n % (500 * $sparse) = 9 THEN 'pending'
                                 WHEN n % (10000 * $sparse) = 13 THEN 'uncertain'
                                 ELSE 'completed' END AS s) x" \
      -c "SELECT setval('effect_serials', $effects + 1)" \
      -c "INSERT INTO effect_attempts (effect_id, attempt, kind, started_at, finished_at, outcome, status_code, error)
       SELECT id, 1, 'delivery', created_at, created_at + interval '80 ms',
              CASE WHEN status = 'completed' THEN 'completed' ELSE 'retry' END,
              CASE WHEN status = 'completed' THEN 200 ELSE 503 END,
              CASE WHEN status = 'completed' THEN NULL ELSE 'HTTP 503' END
       FROM effects" \
      -c "INSERT INTO effect_resolutions (effect_id, previous_status, action, resolved_by, note)
       SELECT id, 'review', 'completed', 'alice', 'confirmed with the sink'
       FROM effects WHERE id % 5000 = 3" >/dev/null
  fi
  "${db[@]}" -c "VACUUM (ANALYZE)" >/dev/null
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

# bench_load PORT CONNECTIONS SECONDS [RATE] [INTEGRATION] [PID] [LOADGEN_FLAG…]: signed
# Stripe load (to stripe-bench unless INTEGRATION names another), prints the loadgen's JSON;
# with PID, that includes the CPU process PID used during the timed window (`cpu_ticks`).
bench_load() {
  LOADGEN_STRIPE_SECRET="$bench_secret" "$bench_bin/inbound-loadgen" --addr "127.0.0.1:$1" \
    --connections "$2" --rate "${4:-0}" --duration-secs "$3" --integration "${5:-stripe-bench}" \
    --events-per-connection "${BENCH_EVENTS_PER_CONNECTION:-20000}" ${6:+--cpu-of "$6"} "${@:7}"
}

# bench_cpu_figures LOADGEN_JSON: the loadgen's JSON, plus where the CPU went over its timed
# window (the loadgen signs its events before the window and frees them after): per
# answered request, the ingress's, the loadgen's and the rest of the machine's
# (PostgreSQL, its WAL writer, anything else), the machine's per accepted receipt, the
# machine's busy cores, and the share of the machine the hypervisor took (steal: a virtual
# machine's neighbours show up there, not in any process's figures).
bench_cpu_figures() {
  python3 - "$1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
run, hz = json.loads(sys.argv[1]), float(sys.argv[2])
ticks = run["cpu_ticks"]
if None in ticks.values():
    sys.exit("bench: the loadgen could not read the CPU figures from /proc")
answers = max(sum(run[key] for key in ("accepted", "duplicate", "other_2xx", "unavailable_503", "other_status")), 1)
per_answer = lambda used: round(used / hz / answers * 1e6, 1)
window = max(ticks["window_secs"], 0.001)
run["ingress_cpu_us_per_answer"] = per_answer(ticks["watched"])
run["loadgen_cpu_us_per_answer"] = per_answer(ticks["loadgen"])
run["rest_cpu_us_per_answer"] = per_answer(ticks["machine_busy"] - ticks["watched"] - ticks["loadgen"])
run["machine_cpu_us_per_accepted"] = round(ticks["machine_busy"] / hz / max(run["accepted"], 1) * 1e6, 1)
run["ingress_cores"] = round(ticks["watched"] / hz / window, 2)
run["busy_cores"] = round(ticks["machine_busy"] / hz / window, 2)
run["steal_share"] = round(ticks["machine_steal"] / max(ticks["machine_total"], 1), 3)
print(json.dumps(run))
PY
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
