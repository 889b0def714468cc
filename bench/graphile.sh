#!/usr/bin/env bash
# graphile-worker 0.18.0 (Node.js) draining the same backlog as `make bench`'s worker rows:
# BENCH_PENDING (default 50000) orders awaiting payment, one job per order carrying the
# ~1 KB Stripe payment_intent.succeeded event of bench_seed_pending's receipt (plus its
# `receipt_id`), each job running inbound's `orders.mark_paid` guarded UPDATE
# (bench/graphile/bench.mjs). Same PostgreSQL, fresh database, timed like worker_rate in
# run.sh: from starting the process until the last order is paid and the jobs table is
# empty. Adds `graphile` (jobs/s), `graphile_rss` (peak RSS of the node process, MiB) and
# `graphile_commits` (commits per job) to RESULTS_JSON, an existing JSON object file.
#
#   bench/graphile.sh RESULTS_JSON
#
# graphile-worker@0.18.0 is npm-installed once into BENCH_NODE_DIR (default
# ~/.cache/inbound-bench/graphile-0.18.0), never into the repository. 0.18.0 declares
# `node >=22.18.0`; npm only warns (EBADENGINE) and it runs on Node 20.
#
# Options: the documented performance configuration of https://worker.graphile.org/docs/performance
# ("Quick stats … achieved with this configuration": concurrentJobs 24, maxPoolSize 25,
# localQueue { size: 500 }, completeJobBatchDelay 0, failJobBatchDelay 0), with the
# concurrency of inbound's --concurrency 32:
#   concurrentJobs 32          = inbound's worker rows at --concurrency 32.
#   maxPoolSize 33             concurrency + 1, as in the docs' configuration (24/25) and the
#                              CLI's perfTest (`-j N -m N+1`).
#   localQueue.size 500        "Batching" on that page: one query fetches and locks up to 500
#                              jobs, handed to the 32 workers without a round trip each (the
#                              docstring: concurrentJobs + 1 is a starting point, "a much
#                              higher number" for high throughput and extremely fast tasks).
#   completeJobBatchDelay 0    Batching of completions (one DELETE … unnest for the jobs
#   failJobBatchDelay 0        completed in the same tick) — the page's values.
#   preparedStatements true    The default, kept (documented: false only for poolers).
#   pollInterval (2000 default) Only for future/retried jobs: new jobs arrive by LISTEN/NOTIFY,
#                              and here all are queued before the start.
#   useNodeTime false          The default; the docs give it no performance role.
#   NO_LOG_SUCCESS=1           Set by graphile-worker's own perfTest/run.js: no info line per
#                              completed job (inbound's binaries run with RUST_LOG=warn; the
#                              task's logger also prints warnings and errors only).
# No named queues (queue_name NULL: the path without job_queues locking) and no "batch jobs"
# (array payloads): one job per receipt, as inbound has one receipt per event. Unlike
# inbound, the business UPDATE and the job's completion are separate transactions
# (graphile runs the task, then deletes the job): at-least-once, not exactly-once.
set -euo pipefail
results=$(realpath "${1:?usage: bench/graphile.sh RESULTS_JSON}")
[ -f "$results" ] || { echo "bench-graphile: $results does not exist (want a JSON object file)" >&2; exit 2; }
cd "$(dirname "$0")/.."

pending="${BENCH_PENDING:-50000}"
concurrency=32
node_dir="${BENCH_NODE_DIR:-$HOME/.cache/inbound-bench/graphile-0.18.0}"
script_started=$(date +%s.%N)
DATABASE_URL=$(scripts/ensure-postgres.sh)
export DATABASE_URL
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap bench_cleanup EXIT
# record KEY VALUE: one figure for the table.
record() { bench_record "$results" "$1" "$2"; }
step() { echo "bench-graphile: $*" >&2; }
fail() {
  echo "bench-graphile: $*" >&2
  [ -s "$bench_work/graphile.log" ] && tail -n 20 "$bench_work/graphile.log" >&2
  exit 1
}

installed=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['version'])" \
  "$node_dir/node_modules/graphile-worker/package.json" 2>/dev/null || true)
if [ "$installed" != 0.18.0 ]; then
  step "installing graphile-worker@0.18.0 into $node_dir"
  mkdir -p "$node_dir"
  [ -f "$node_dir/package.json" ] || echo '{ "private": true }' >"$node_dir/package.json"
  npm install --prefix "$node_dir" --no-audit --no-fund --save-exact --loglevel=error \
    graphile-worker@0.18.0 >&2
fi
export GRAPHILE_NODE_DIR="$node_dir" GRAPHILE_CONCURRENCY="$concurrency" GRAPHILE_WORK_DIR="$bench_work"

step "seeding $pending orders and jobs"
url=$(bench_db inbound_bench_graphile)
export GRAPHILE_DATABASE_URL="$url"
bench_seed_pending "$url" "$pending"
node bench/graphile/bench.mjs migrate 2>>"$bench_work/graphile.log" || fail "graphile-worker's migrations failed"
# One add_jobs call (graphile's batch API) with every receipt's payload; inbound's own
# queue is emptied, the receipts stay as the payloads' source.
psql -Atq "$url" -c "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
       SELECT ROW('mark_paid', (payload || jsonb_build_object('receipt_id', receipt_id))::json,
                  NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
       FROM receipt_payloads ORDER BY receipt_id))" -c "TRUNCATE receipt_queue" -c "VACUUM ANALYZE" >/dev/null
queued=$(psql -Atq "$url" -c "SELECT count(*) FROM graphile_worker._private_jobs")
[ "$queued" = "$pending" ] || fail "$queued jobs queued, not $pending"

step "draining with concurrentJobs $concurrency, localQueue 500, batched completion"
commits_before=$(bench_commits "$url")
started=$(bench_now)
NO_LOG_SUCCESS=1 node bench/graphile/bench.mjs run 2>>"$bench_work/graphile.log" &
pid=$!
bench_pids+=("$pid")
# Twice a second, like bench_seconds_until_done, but failing on a job error (a failed job
# would only be retried later) or a dead process instead of waiting for ever.
while :; do
  sleep 0.5
  kill -0 "$pid" 2>/dev/null || fail "graphile-worker exited"
  state=$(psql -Atq "$url" -c "SELECT count(*), count(*) FILTER (WHERE last_error IS NOT NULL)
                               FROM graphile_worker._private_jobs")
  [ "${state#*|}" = 0 ] || fail "jobs failed: $(psql -Atq "$url" -c "SELECT last_error FROM graphile_worker._private_jobs WHERE last_error IS NOT NULL LIMIT 1")"
  [ "${state%|*}" = 0 ] && break
done
# The end is the last order's updated_at (the UPDATE's now()): its job's completion DELETE
# follows within milliseconds, and the jobs table being empty proves it happened.
elapsed=$(python3 -c "print($(psql -Atq "$url" -c "SELECT EXTRACT(EPOCH FROM max(updated_at)) FROM orders WHERE status = 'paid'") - $started)")
rss=$(bench_rss_mib "$pid")
cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' "/proc/$pid/stat")
kill -TERM "$pid"
wait "$pid" 2>/dev/null || true
paid=$(psql -Atq "$url" -c "SELECT count(*) FROM orders WHERE status = 'paid'")
[ "$paid" = "$pending" ] || fail "only $paid of $pending orders paid"
rate=$(python3 -c "print(round($pending / $elapsed))")
record graphile "$rate"
record graphile_rss "$rss"
record graphile_commits "$(python3 -c "print(round(($(bench_commits "$url") - $commits_before) / $pending, 3))")"
step "graphile-worker 0.18.0: $rate jobs/s ($pending in $(printf %.2f "$elapsed") s, node $cpu CPU-s, peak RSS $rss MiB;" \
  "$(grep -m1 -o 'running .* after node started' "$bench_work/graphile.log" || echo 'startup time unknown'));" \
  "script took $(python3 -c "print(round($(date +%s.%N) - $script_started))") s"
