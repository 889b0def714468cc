#!/usr/bin/env bash
# `make bench-subjects`: what subjects and ordered routes cost, side by side in one run on
# one PostgreSQL (docs/contract.md, "Subjects", "Ordered routes"). A benchmark, not a test:
# compare the ratios, not the absolute numbers.
#
#   ingress   accepted/s and CPU per accepted receipt (the machine's: ingress, PostgreSQL,
#             the load generator) at 32 connections, signed Stripe events that name a
#             subject (their PaymentIntent: a subject stored and indexed with each receipt)
#             against the same events naming none (`inbound-loadgen --without-subject`:
#             `ref` for `id`, the same bytes), alternating, BENCH_SUBJECT_ROUNDS rounds
#   worker    receipts applied/s, --concurrency 32, BENCH_PENDING receipts unordered against
#             the same ordered over 10,000 subjects, and BENCH_HOT_PENDING ordered over 10
#             hot subjects (bounded by one business transaction per subject at a time)
# The timeline's time on 5,000,000 receipts is `make bench-console`'s (a subject of 1,000).
# Prints one JSON object; figures go into BENCHMARKS.md by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${BENCH_SECONDS:-10}"
pending="${BENCH_PENDING:-50000}"
hot_pending="${BENCH_HOT_PENDING:-10000}"
rounds="${BENCH_SUBJECT_ROUNDS:-3}"
DATABASE_URL=$(scripts/ensure-postgres.sh)
export DATABASE_URL
cargo build --quiet --release -p inbound-ingress -p inbound-stock-worker -p inboundctl
cargo build --quiet --release -p inbound-programs --bin inbound-loadgen
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap bench_cleanup EXIT
results="$bench_work/results.json"
echo '{}' > "$results"
record() { bench_record "$results" "$1" "$2"; }
step() { echo "bench: $*" >&2; }

# ingress_pair ROUND: one run naming subjects and one naming none, on a fresh database
# each (the order alternates by round, so neither always meets a warmer machine).
ingress_pair() {
  local round="$1" first second
  if [ $((round % 2)) = 1 ]; then first=with second=without; else first=without second=with; fi
  for arm in $first $second; do
    local url run
    url=$(bench_db inbound_bench_subjects)
    bench_start_ingress "$url" 18084 19097
    if [ "$arm" = with ]; then
      run=$(bench_load 18084 32 "$seconds" 0 stripe-bench "$bench_ingress_pid")
    else
      run=$(bench_load 18084 32 "$seconds" 0 stripe-bench "$bench_ingress_pid" --without-subject)
    fi
    record "ingress_${arm}_$round" "$(bench_cpu_figures "$run")"
    kill "$bench_ingress_pid"
    wait "$bench_ingress_pid" 2>/dev/null || true
    # Every receipt of the run naming subjects has one; none of the other's.
    local unnamed
    unnamed=$(psql -Atq "$url" -c "SELECT count(*) FILTER (WHERE (subject IS NULL) = ('$arm' = 'with')) FROM receipts")
    [ "$unnamed" = 0 ] || { echo "bench: $unnamed receipts of the run $arm subjects are not so" >&2; exit 1; }
  done
}
for round in $(seq 1 "$rounds"); do
  step "ingress round $round of $rounds: with and without subjects, 32 connections"
  ingress_pair "$round"
done

queue_left="SELECT count(*) FROM receipt_queue"
last_finished="SELECT EXTRACT(EPOCH FROM max(finished_at)) FROM receipts"
# worker_rate KEY N SUBJECTS: N receipts (ordered over SUBJECTS, 0: unordered) drained by
# one worker at --concurrency 32.
worker_rate() {
  local key="$1" n="$2" subjects="$3" url started elapsed applied
  url=$(bench_db inbound_bench_subjects)
  bench_seed_pending "$url" "$n" 1 "$subjects"
  started=$(bench_now)
  bench_start_worker "$url" 19198 "bench-$key" --concurrency 32
  elapsed=$(bench_seconds_until_done "$url" "$queue_left" "$last_finished" "$started")
  kill -TERM "$bench_worker_pid"
  wait "$bench_worker_pid" 2>/dev/null || true
  applied=$(psql -Atq "$url" -c "SELECT count(*) FROM receipts WHERE outcome = 'applied'")
  [ "$applied" = "$n" ] || { echo "bench: only $applied of $n applied" >&2; exit 1; }
  record "$key" "$(python3 -c "print(round($n / $elapsed))")"
}
step "worker: unordered, then ordered over 10,000 subjects, then over 10 hot subjects"
worker_rate worker_unordered "$pending" 0
worker_rate worker_ordered_10000 "$pending" 10000
worker_rate worker_unordered_again "$pending" 0
worker_rate worker_ordered_10000_again "$pending" 10000
worker_rate worker_ordered_10_hot "$hot_pending" 10
psql -q "$bench_admin_url" -c "DROP DATABASE IF EXISTS inbound_bench_subjects WITH (FORCE)" >/dev/null

python3 - "$results" "$rounds" <<'PY'
import json, sys
figures, rounds = json.load(open(sys.argv[1])), int(sys.argv[2])
summary = {}
for arm in ("with", "without") if rounds else ():
    runs = [json.loads(figures[f"ingress_{arm}_{n}"]) for n in range(1, rounds + 1)]
    summary[f"ingress_{arm}"] = [
        {key: run[key] for key in ("accepted_per_sec", "machine_cpu_us_per_accepted",
                                   "ingress_cpu_us_per_answer", "rest_cpu_us_per_answer",
                                   "busy_cores")}
        for run in runs]
cpu = lambda arm: [r["machine_cpu_us_per_accepted"] for r in summary[f"ingress_{arm}"]]
rate = lambda arm: [r["accepted_per_sec"] for r in summary[f"ingress_{arm}"]]
if rounds:
    summary["ingress_cpu_ratio_per_round"] = [round(w / o, 3) for w, o in zip(cpu("with"), cpu("without"))]
    summary["ingress_rate_ratio_per_round"] = [round(w / o, 3) for w, o in zip(rate("with"), rate("without"))]
for key in ("worker_unordered", "worker_ordered_10000", "worker_unordered_again",
            "worker_ordered_10000_again", "worker_ordered_10_hot"):
    summary[key] = int(figures[key])
summary["worker_ordered_ratio"] = [
    round(summary["worker_ordered_10000"] / summary["worker_unordered"], 3),
    round(summary["worker_ordered_10000_again"] / summary["worker_unordered_again"], 3)]
print(json.dumps(summary, indent=1))
PY
