#!/usr/bin/env bash
# `make bench`: every throughput figure side by side, in one run on the same PostgreSQL,
# written as one table into BENCHMARKS.md (between the bench markers) with the machine
# and the date. A benchmark, not a test: compare the ratios, not the absolute numbers.
#
#   ceilings (ingress) pgbench, one ~1 KB INSERT … ON CONFLICT DO NOTHING per transaction, -c 32:
#                      into our receipts schema, and into the leanest table that holds a
#                      receipt (the physical limit, prepared statements)
#   ingress            accepted/s through HTTP, valid Stripe signatures, ~20 % redeliveries,
#                      at 32 and 128 connections, with CPU per answered request, in
#                      BENCH_INGRESS_ROUNDS rounds (default 3), each beside both ceilings;
#                      p50/p99 at half the peak rate (open loop)
#   floors             what the machine allows beneath the targets, in the same run: the WAL
#                      disk (pg_test_fsync), CPU per 404 at the receipt path's rate, the 404
#                      path and the physical limit (pgbench -R) at half the peak, and the
#                      share of the machine the hypervisor stole during each ingress run
#   ceiling (worker)   pgbench, claim + orders.mark_paid + done for 50 receipts per transaction
#   worker             receipts applied/s with BENCH_PENDING pending, --concurrency 8 and 32
#                      (batched, 50 per transaction like the ceiling), and 32 with --batch-size 1 and 16
#   graphile-worker    0.18 draining the same backlog with the same business UPDATE
#                      (bench/graphile.sh)
#   recovery           SIGKILL of a loaded worker → its claims done by another
#   dispatcher         effects delivered/s to a local 200 sink, --effect-concurrency 32
#   history            ingress accepted/s and worker applied/s, empty vs BENCH_GROWTH_ROWS
#                      (20 M) receipts accepted over 90 days (bench_seed_history), with
#                      BENCH_HISTORY_PENDING (100,000) of them still queued; beside them the
#                      console's overview and `inboundctl status`, and retention: the oldest
#                      day's payloads dropped, then the oldest key period (statement time)
#   memory             peak RSS under hostile inputs (bench/memory.sh)
#   forgery            ingress CPU per forged request of each scheme at the largest head
#                      and body the defaults allow (bench/forgery.sh)
#   plus peak RSS of each binary and commits per receipt (pg_stat_database.xact_commit).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${BENCH_SECONDS:-10}"
pending="${BENCH_PENDING:-50000}"
growth_rows="${BENCH_GROWTH_ROWS:-20000000}"
history_pending="${BENCH_HISTORY_PENDING:-100000}"
DATABASE_URL=$(scripts/ensure-postgres.sh)
export DATABASE_URL
cargo build --quiet --release -p inbound-ingress -p inbound-stock-worker -p inboundctl
cargo build --quiet --release -p inbound-programs --bin inbound-loadgen
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap bench_cleanup EXIT
results="$bench_work/results.json"
echo '{}' > "$results"
# record KEY VALUE: one figure for the table.
record() { bench_record "$results" "$1" "$2"; }
step() { echo "bench: $*" >&2; }

# --- ingress ceilings and ingress, BENCH_INGRESS_ROUNDS rounds side by side -------------------
# Two ceilings, both pgbench at 32 connections, one row per transaction:
#   schema ceiling    one receipt through our whole schema as the ingress writes it (its key
#                     claimed, its row, payload and queue row: every index and check), simple
#                     query protocol
#   physical limit    the cheapest durable single-row insert: (source_scope, event_id) as the
#                     primary key, event_type, the ~1 KB jsonb payload, received_at;
#                     prepared statements
# Each round measures both ceilings, then the ingress at 32 and 128 connections, with the
# ingress's CPU (utime + stime from /proc) per answered request.
# (pgbench reads ":name" as a variable: hence the space in `"livemode": false`.)
payload=$(printf '{"id":"evt","object":"event","type":"payment_intent.succeeded","livemode": false,"data":{"object":{"id":"pi_1","amount_received":2000,"currency":"usd","metadata":{"order_id":"order_1","note":"%s"}}}}' "$(printf 'x%.0s' $(seq 1 800))")
cat > "$bench_work/insert.sql" <<SQL
\set n random(1, 2000000000)
WITH new AS (
  SELECT * FROM claim_receipt_keys(ARRAY['stripe-bench'], ARRAY['stripe-bench/platform/test'],
                                   ARRAY['evt_' || :n], ARRAY[NULL::bytea], NULL)
), inserted AS (
  INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key)
  SELECT 'stripe-bench', source_scope, event_id, 'payment_intent.succeeded', 'payment_intent.succeeded'
  FROM new RETURNING id, received_at
), stored AS (
  INSERT INTO receipt_payloads (receipt_id, payload) SELECT id, '$payload'::jsonb FROM inserted
)
INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes)
SELECT id, 'stripe-bench', received_at, received_at, 1000 FROM inserted;
SQL
cat > "$bench_work/physical.sql" <<SQL
\set n random(1, 2000000000)
INSERT INTO bench_physical (source_scope, event_id, event_type, payload)
VALUES ('stripe-bench/platform/test', 'evt_' || :n, 'payment_intent.succeeded', '$payload')
ON CONFLICT DO NOTHING;
SQL
# ingress_run CONNECTIONS [RATE] [INTEGRATION]: the loadgen's JSON with where the CPU went
# over its timed window (bench_cpu_figures).
ingress_run() {
  local run
  run=$(bench_load 18080 "$1" "$seconds" "${2:-0}" "${3:-stripe-bench}" "$bench_ingress_pid")
  bench_cpu_figures "$run"
}
# ceiling_run PGBENCH_ARGS…: pgbench's transactions per second, with where the CPU went
# over the run: pgbench's own per transaction, the rest of the machine's (PostgreSQL and
# anything else) per transaction, the machine's busy cores and the share stolen.
ceiling_run() {
  python3 - "$(getconf CLK_TCK)" pgbench "$@" <<'PY'
import json, re, resource, subprocess, sys, time
hz, command = float(sys.argv[1]), sys.argv[2:]
def machine():
    values = [int(v) for v in open("/proc/stat").readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = values
    return user + nice + system + irq + softirq, steal, sum(values)
before, started = machine(), time.monotonic()
# pgbench's stderr (its reason, when it fails) goes to the bench's.
output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
after, window = machine(), time.monotonic() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
tps = re.search(r"^tps = ([0-9.]+)", output, re.MULTILINE)
processed = re.search(r"^number of transactions actually processed: ([0-9]+)", output, re.MULTILINE)
if not (tps and processed):
    sys.exit("bench: pgbench printed no tps: " + output[-500:])
tps, transactions = float(tps.group(1)), max(int(processed.group(1)), 1)
client = usage.ru_utime + usage.ru_stime
busy = (after[0] - before[0]) / hz
print(json.dumps({
    "tps": tps,
    "client_cpu_us_per_tx": round(client / transactions * 1e6, 1),
    "rest_cpu_us_per_tx": round((busy - client) / transactions * 1e6, 1),
    "machine_cpu_us_per_tx": round(busy / transactions * 1e6, 1),
    "busy_cores": round(busy / window, 2),
    "steal_share": round((after[1] - before[1]) / max(after[2] - before[2], 1), 3),
}))
PY
}
# The HTTP floor: the same signed requests to an integration that does not exist, answered
# 404 before the body is read — no verification, no database — in open loop at the rate
# the receipt path just reached, so both pay the same wake-ups per request.
http_floor_integration=no-such-integration
# The WAL disk's own speed: one 8 kB write + fdatasync, measured where PostgreSQL keeps
# its data when that is on this machine; it sets the physical limit and moves from day to
# day on a virtual machine.
fsync_probe() {
  local data_directory tool
  data_directory=$(psql -Atq "$bench_admin_url" -c "SHOW data_directory" 2>/dev/null || true)
  tool=$(find /usr/lib/postgresql/*/bin -name pg_test_fsync 2>/dev/null | sort -V | tail -1)
  if [ -z "$tool" ] || [ ! -d "$data_directory" ] || [ ! -w "$(dirname "$data_directory")" ]; then
    echo null
    return
  fi
  # pg_test_fsync removes its file only when it finishes normally: so do we, whatever happened.
  local scratch
  scratch="$(dirname "$data_directory")/inbound-bench-fsync.tmp"
  "$tool" -s 1 -f "$scratch" >"$bench_work/fsync.txt" 2>&1 || true
  rm -f "$scratch"
  awk '/^Compare file sync methods using one/ { one = 1 }
       one && $1 == "fdatasync" { print $4; found = 1; exit }
       END { if (!found) print "null" }' "$bench_work/fsync.txt"
}
record machine_cores "$(nproc)"
step "the WAL disk: pg_test_fsync"
record fsync_us "$(fsync_probe)"
rounds="${BENCH_INGRESS_ROUNDS:-3}"
record ingress_rounds "$rounds"
for round in $(seq 1 "$rounds"); do
  step "ingress round $round of $rounds: both ceilings (pgbench), then 32 and 128 connections"
  url=$(bench_db inbound_bench)
  psql -q "$url" -c "CREATE TABLE bench_physical (source_scope text, event_id text, event_type text NOT NULL,
          payload jsonb NOT NULL, received_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (source_scope, event_id))" >/dev/null
  schema_ceiling=$(pgbench -n -c 32 -j 2 -T "$seconds" -f "$bench_work/insert.sql" "$url" | awk '/^tps = / { print $3; exit }')
  physical_run=$(ceiling_run -n -M prepared -c 32 -j 2 -T "$seconds" -f "$bench_work/physical.sql" "$url")
  bench_start_ingress "$url" 18080 19090
  commits_before=$(bench_commits "$url")
  run32=$(ingress_run 32)
  commits_after=$(bench_commits "$url")
  # At least 1/s: a rate of 0 would make the floor a closed loop.
  floor_rate=$(python3 -c 'import json, sys; print(max(1, round(json.loads(sys.argv[1])["requests_per_sec"])))' "$run32")
  floor32=$(ingress_run 32 "$floor_rate" "$http_floor_integration")
  run128=$(ingress_run 128)
  record "ingress_round_$round" "$(python3 - "$schema_ceiling" "$physical_run" "$run32" "$run128" \
    "$((commits_after - commits_before))" "$(bench_rss_mib "$bench_ingress_pid")" "$floor32" <<'PY'
import json, sys
schema, physical, run32, run128, commits, rss, floor32 = sys.argv[1:8]
run32, physical = json.loads(run32), json.loads(physical)
print(json.dumps({
    "schema_ceiling": float(schema), "physical_ceiling": physical["tps"], "physical": physical,
    "run32": run32, "run128": json.loads(run128), "rss_mib": float(rss),
    "commits_per_request": round(int(commits) / max(run32["accepted"] + run32["duplicate"], 1), 3),
    "floor32": json.loads(floor32),
}))
PY
)"
  # The last round's ingress stays up for the latency run.
  if [ "$round" -lt "$rounds" ]; then kill "$bench_ingress_pid"; fi
done
peak=$(python3 - "$results" <<'PY'
import json, sys
figures = json.load(open(sys.argv[1]))
rounds = [json.loads(figures[f"ingress_round_{n}"]) for n in range(1, int(figures["ingress_rounds"]) + 1)]
print(int(max(max(r["run32"]["requests_per_sec"], r["run128"]["requests_per_sec"]) for r in rounds)))
PY
)
step "ingress at half the peak rate (open loop)"
# Open loop at half the peak; 128 connections so that one in-flight request per connection
# never caps the offered rate (at 32 the schedule itself would queue).
# Assignments, so that a failed run stops the bench instead of recording nothing.
half=$(ingress_run 128 $((peak / 2)))
record ingress_half "$half"
record ingress_rss "$(bench_rss_mib "$bench_ingress_pid")"
# What this machine allows at that rate: the same open loop answered 404 (the HTTP path and
# the load generator's own timer), and the physical limit throttled to that rate (pgbench
# -R; its latency counted from the schedule, as the loadgen's is).
half_floor=$(ingress_run 128 $((peak / 2)) "$http_floor_integration")
record ingress_half_floor "$half_floor"
kill "$bench_ingress_pid"
wait "$bench_ingress_pid" 2>/dev/null || true
pgbench -n -M prepared -c 32 -j 2 -T "$seconds" -R $((peak / 2 > 0 ? peak / 2 : 1)) -f "$bench_work/physical.sql" \
  -l --log-prefix "$bench_work/physical-half" "$url" >/dev/null
# An assignment, so that a failure here stops the bench instead of recording nothing.
physical_half=$(cat "$bench_work"/physical-half.* | python3 -c '
import json, sys
# pgbench -l: client, transaction, latency µs, script, epoch s, epoch µs, schedule lag µs.
# With -R the latency already runs from the scheduled start (it includes the lag).
latencies = sorted(int(fields[2]) for fields in (line.split() for line in sys.stdin) if fields[2].isdigit())
if not latencies:
    sys.exit("bench: pgbench logged no completed transaction at half the peak")
pick = lambda share: latencies[min(len(latencies) - 1, int(share * len(latencies)))] / 1000
print(json.dumps({"transactions": len(latencies), "p50_ms": pick(0.50), "p99_ms": pick(0.99), "p999_ms": pick(0.999)}))')
record physical_half "$physical_half"

# --- worker ceiling ------------------------------------------------------------------------
step "worker ceiling (pgbench, 50 receipts per transaction)"
url=$(bench_db inbound_bench_worker)
ceiling_backlog=$((pending * 10))
bench_seed_pending "$url" "$ceiling_backlog"
cat > "$bench_work/worker.sql" <<'SQL'
WITH claimable AS MATERIALIZED (
    SELECT receipt_id FROM receipt_queue WHERE visible_at <= now()
    ORDER BY visible_at, receipt_id LIMIT 50 FOR UPDATE SKIP LOCKED
), taken AS (
    DELETE FROM receipt_queue q USING claimable c WHERE q.receipt_id = c.receipt_id
    RETURNING q.receipt_id
), paid AS (
    UPDATE orders o
    SET status = 'paid', amount_received_minor = 2000, paid_receipt_id = r.id,
        paid_at = now(), updated_at = now()
    FROM taken t JOIN receipts r ON r.id = t.receipt_id
    JOIN receipt_payloads p ON p.receipt_id = t.receipt_id
    WHERE o.tenant_id = 'bench' AND o.id = p.payload #>> '{data,object,metadata,order_id}'
      AND o.status = 'awaiting_payment' AND o.provider_payment_id = p.payload #>> '{data,object,id}'
    RETURNING r.id
)
UPDATE receipts r SET status = 'done', outcome = 'applied', finished_at = now(), attempts = 1
FROM paid p WHERE r.id = p.id;
SQL
started=$(bench_now)
pgbench -n -c 8 -j 2 -T "$seconds" -f "$bench_work/worker.sql" "$url" >/dev/null
elapsed=$(python3 -c "print($(bench_now) - $started)")
done_count=$(psql -Atq "$url" -c "SELECT count(*) FROM receipts WHERE status = 'done'")
[ "$done_count" -lt "$ceiling_backlog" ] || echo "bench: the worker ceiling ran out of backlog; raise BENCH_PENDING" >&2
record worker_ceiling "$(python3 -c "print(round($done_count / $elapsed))")"

# --- worker -------------------------------------------------------------------------------------
queue_left="SELECT count(*) FROM receipt_queue"
last_finished="SELECT EXTRACT(EPOCH FROM max(finished_at)) FROM receipts"
# worker_rate KEY FLAGS…: a fresh backlog of $pending, drained by one worker.
worker_rate() {
  local key="$1"
  shift
  url=$(bench_db inbound_bench_worker)
  bench_seed_pending "$url" "$pending"
  local before
  before=$(bench_commits "$url")
  local started
  started=$(bench_now)
  bench_start_worker "$url" 19191 "bench-$key" "$@"
  local pid=$bench_worker_pid
  local elapsed
  elapsed=$(bench_seconds_until_done "$url" "$queue_left" "$last_finished" "$started")
  record "${key}_rss" "$(bench_rss_mib "$pid")"
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  local applied
  applied=$(psql -Atq "$url" -c "SELECT count(*) FROM receipts WHERE outcome = 'applied'")
  [ "$applied" = "$pending" ] || { echo "bench: only $applied of $pending applied" >&2; exit 1; }
  record "$key" "$(python3 -c "print(round($pending / $elapsed))")"
  record "${key}_commits" "$(python3 -c "print(round(($(bench_commits "$url") - $before) / $pending, 3))")"
}
step "worker (concurrency 8, 32, 32 unbatched, 32 with batches of 16)"
worker_rate worker8 --concurrency 8
worker_rate worker32 --concurrency 32
worker_rate worker32_unbatched --concurrency 32 --batch-size 1
worker_rate worker32_batch16 --concurrency 32 --batch-size 16

step "graphile-worker 0.18: the same backlog, the same business UPDATE"
bench/graphile.sh "$results"

step "recovery after SIGKILL"
# Four times the backlog: a worker draining it in a few seconds must still be mid-run
# when a psql poll on the saturated machine notices a quarter is done.
recovery_backlog=$((pending * 4))
url=$(bench_db inbound_bench_worker)
bench_seed_pending "$url" "$recovery_backlog"
record recovery_backlog "$recovery_backlog"
bench_start_worker "$url" 19192 bench-victim --concurrency 32 --lease-secs 5
victim=$bench_worker_pid
while [ "$(psql -Atq "$url" -c "SELECT count(*) FROM receipts WHERE status = 'done'")" -lt $((recovery_backlog / 4)) ]; do sleep 0.05; done
kill -KILL "$victim"
killed_at=$(bench_now)
psql -Atq "$url" -c "CREATE TABLE orphaned AS SELECT receipt_id FROM receipt_queue WHERE leased_by = 'bench-victim' AND visible_at > now()" >/dev/null
record orphaned "$(psql -Atq "$url" -c "SELECT count(*) FROM orphaned")"
bench_start_worker "$url" 19193 bench-successor --concurrency 32 --lease-secs 5
while [ "$(psql -Atq "$url" -c "SELECT count(*) FROM orphaned o JOIN receipts r ON r.id = o.receipt_id WHERE r.status <> 'done'")" != 0 ]; do sleep 0.05; done
record recovery_secs "$(python3 -c "print(round($(bench_now) - $killed_at, 2))")"
bench_drain "$url" >/dev/null
record recovery_applied "$(psql -Atq "$url" -c "SELECT count(*) FROM receipts WHERE outcome = 'applied'")"
kill -TERM "$bench_worker_pid"

step "dispatcher"
url=$(bench_db inbound_bench_worker)
bench_seed_pending "$url" "$pending"
psql -Atq "$url" -c "WITH done AS (DELETE FROM receipt_queue RETURNING receipt_id)
     UPDATE receipts SET status = 'done', outcome = 'applied', finished_at = now() FROM done WHERE id = done.receipt_id" \
  -c "INSERT INTO effects (id, receipt_id, operation_key, sink, kind, tenant, data, event)
     SELECT effect_id_for(id), id, 'order.paid:bench:' || id, 'bench-sink', 'order.paid', 'bench',
            jsonb_build_object('order_id', 'o' || id), jsonb_build_object('integration', 'stripe-bench', 'id', event_id, 'type', event_type)
     FROM receipts" -c "VACUUM ANALYZE" >/dev/null
"$bench_bin/inboundctl" dev-sink --listen "127.0.0.1:$bench_sink_port" >/dev/null 2>&1 &
bench_pids+=($!)
sleep 0.5
started=$(bench_now)
bench_start_worker "$url" 19194 bench-dispatch --effect-concurrency 32
elapsed=$(bench_seconds_until_done "$url" "SELECT count(*) FROM effects WHERE status <> 'completed'" \
  "SELECT EXTRACT(EPOCH FROM max(completed_at)) FROM effects" "$started")
record dispatcher "$(python3 -c "print(round($pending / $elapsed))")"
record dispatcher_rss "$(bench_rss_mib "$bench_worker_pid")"
kill -TERM "$bench_worker_pid"

# --- growth --------------------------------------------------------------------------------------
# growth_round LABEL FIRST_ORDER: ingress accepted/s at 32 connections, then the worker at 32.
growth_round() {
  bench_start_ingress "$url" 18082 19095
  record "growth_${1}_ingress" "$(bench_json "$(bench_load 18082 32 "$seconds")" accepted_per_sec)"
  kill "$bench_ingress_pid"
  psql -Atq "$url" -c "TRUNCATE receipt_queue" >/dev/null
  bench_seed_pending "$url" "$pending" "$2"
  local started
  started=$(bench_now)
  bench_start_worker "$url" 19196 "bench-growth-$1" --concurrency 32
  local elapsed
  elapsed=$(bench_seconds_until_done "$url" "$queue_left" "$last_finished" "$started")
  record "growth_${1}_worker" "$(python3 -c "print(round($pending / $elapsed))")"
  kill -TERM "$bench_worker_pid"
  wait "$bench_worker_pid" 2>/dev/null || true
}
step "history: empty database"
url=$(bench_db inbound_bench_growth)
growth_round empty 1
step "history: $growth_rows receipts accepted over 90 days, $history_pending of them pending"
bench_seed_history "$url" "$growth_rows" "$history_pending" $((growth_rows / 20)) 10
# The empty round started right after CREATE DATABASE, which checkpoints; so does this one
# — otherwise it would pay for flushing the history just written.
psql -q "$url" -c CHECKPOINT >/dev/null
record growth_rows "$growth_rows"
record history_pending "$history_pending"
growth_round full $((pending + 1))

step "history: the overview and inboundctl status beside it"
# median_ms COMMAND…: the median wall time of 10 runs, in ms.
median_ms() {
  for _ in $(seq 1 10); do
    /usr/bin/time -f '%e' "$@" 2>&1 >/dev/null | tail -1
  done | sort -n | awk '{ t[NR] = $1 * 1000 } END { printf "%.0f", t[int((NR + 1) / 2)] }'
}
record history_status_ms "$(median_ms "$bench_bin/inboundctl" status --database-url "$url")"
"$bench_bin/inboundctl" console --database-url "$url" --by bench --listen 127.0.0.1:0 \
  >"$bench_work/console.log" 2>&1 &
bench_pids+=("$!")
for _ in $(seq 1 100); do grep -q "console listening on" "$bench_work/console.log" && break; sleep 0.1; done
console=$(sed -n 's/^console listening on //p' "$bench_work/console.log")
record history_overview_ms "$(median_ms curl -sf -o /dev/null "$console/")"

step "history: retention drops the oldest day's payloads, then the oldest key period"
# drop_until_done FUNCTION_CALL: calls a retention function (one partition a call) until it
# drops nothing; prints the slowest call's time in ms (psql's \timing, client side: the
# round trip included) and how many partitions went.
drop_until_done() {
  local slowest=0 dropped=0 out rows ms
  while :; do
    out=$(psql -qAt -v ON_ERROR_STOP=1 "$url" -c '\timing on' -c "SELECT count(*) FROM $1") || break
    rows=$(head -1 <<<"$out")
    ms=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out" | tail -1)
    [ "$rows" = 0 ] && break
    dropped=$((dropped + 1))
    slowest=$(python3 -c "print(max($slowest, $ms))")
  done
  echo "$slowest $dropped"
}
record history_day_rows $((growth_rows / 90))
# The memory rule (docs/operations.md): bytes per receipt of the two indexes an insert
# writes at a random place, the receipt key's and the event id's, over every period.
record history_key_index_bytes "$(psql -Atq "$url" -c "SELECT round(sum(pg_relation_size(i.indexrelid))::numeric / $growth_rows, 1)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
  WHERE c.relname ~ '^(receipt_keys_[0-9]{8}_pkey|receipts_[0-9]{8}_event_id_idx)$'")"
read -r slowest days <<<"$(drop_until_done "drop_payload_days(89)")"
record history_drop_day_ms "$slowest"
record history_days_dropped "$days"
oldest_period=$(psql -Atq "$url" -c "SELECT max(estimated_rows) FROM history_partitions() WHERE parent = 'receipts' AND end_day <= key_period(now()) - 90")
record history_period_rows "$oldest_period"
read -r slowest periods <<<"$(drop_until_done "drop_key_periods(1)")"
record history_drop_period_ms "$slowest"
record history_periods_dropped "$periods"
# The full previous period (nearly all 20 M receipts), as if the next period had begun: the table owner's
# clock (the operator role cannot pass one). Locked, carried and detached; then its files
# removed apart, with no lock a writer needs.
full_period=$(psql -Atq "$url" -c "SELECT max(estimated_rows) FROM history_partitions() WHERE parent = 'receipts'")
record history_full_period_rows "$full_period"
read -r slowest _ <<<"$(drop_until_done "drop_key_periods_at(1, (key_period(now()) + 91)::timestamptz)")"
record history_drop_full_period_ms "$slowest"
record history_full_period_carried "$(psql -Atq "$url" -c "SELECT count(*) FROM receipts_default")"
read -r slowest _ <<<"$(drop_until_done "(SELECT drop_detached_history() AS d) x WHERE d IS NOT NULL")"
record history_drop_files_ms "$slowest"
left=$(psql -Atq "$url" -c "SELECT count(*) FROM history_partitions() WHERE parent = 'receipts' AND end_day <= key_period(now()) - 90")
[ "$left" = 0 ] || { echo "bench: retention left $left key period(s) behind" >&2; exit 1; }

# --- memory under hostile inputs ----------------------------------------------------------------
step "memory: 1 MB bodies in 1-byte chunks; 500 KB payloads"
bench/memory.sh "$results"
bench/forgery.sh "$results"

# --- the table ----------------------------------------------------------------------------------
machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(psql -Atq "$bench_admin_url" -c "SHOW server_version" | cut -d' ' -f1) PostgreSQL, $(rustc --version | cut -d' ' -f2) rustc"
python3 bench/table.py "$results" "$machine" "$(date -u +%Y-%m-%d)" "$pending" BENCHMARKS.md
