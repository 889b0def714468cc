#!/usr/bin/env bash
# `make bench-console`: each console page's time on a large database — 5,000,000 receipts
# accepted over 90 days (bench_seed_history: 5 integrations, ~400-byte payloads, 2,500
# failed or quarantined, 10,000 queued), and
# beside them the worst payload the ingress accepts at its default limits (1 MiB of zeros
# 62 levels deep) and 200,000 receipts of one integration in as many scopes (what a
# sender can make: Shopify's shop header is unsigned) — and 1,000,000 effects (3 sinks,
# 3,600 open or in review, one attempt each) — with the plan
# of each page's main statement. A benchmark, not a test: the target is ≤ 200 ms a page on
# this machine. BENCH_CONSOLE_RECEIPTS and BENCH_CONSOLE_EFFECTS scale it (e.g. 200000
# and 40000 for a quick look, 20000000 for a year's history), BENCH_CONSOLE_PENDING sets
# the backlog; BENCH_CONSOLE_KEEP=1 keeps the database.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap bench_cleanup EXIT

receipts="${BENCH_CONSOLE_RECEIPTS:-5000000}"
# The newest receipts still queued (a backlog: 124,000 is what a day of history met).
pending="${BENCH_CONSOLE_PENDING:-10000}"
effects="${BENCH_CONSOLE_EFFECTS:-1000000}"
runs=20
cargo build --release -q -p inboundctl -p inbound-stock-worker
url=$(bench_db inbound_bench_console)
db() { psql -Atq -v ON_ERROR_STOP=1 "$url" "$@"; }

echo "== seeding $receipts receipts and $effects effects"
started=$(date +%s)
bench_seed_history "$url" "$receipts" "$pending" "$effects"
# The worst payload the default limits take: 1,048,576 bytes at most, nested at most 64
# deep (the outer object and 62 arrays), every element a zero (rendering it indented would
# be 133 MB); failed, so the review queue leads the on-call person to it.
db -c "WITH deep AS (
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                               status, attempts, last_error, finished_at)
         VALUES ('stripe-live', 'stripe-live/platform/live', 'evt_deep', 'payment_intent.succeeded',
                 'payment_intent.succeeded', 'failed', 8, 'handler failed', now())
         RETURNING id)
       INSERT INTO receipt_payloads (receipt_id, payload)
       SELECT id, ('{\"x\": ' || repeat('[', 62) || array_to_string(array_fill(0, ARRAY[524000]), ',')
                   || repeat(']', 62) || '}')::jsonb FROM deep"
# Scopes a sender made: one receipt each.
db -c "WITH scoped AS (
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                               status, outcome, finished_at)
         SELECT 'shopify-shop', 'shopify-shop/shop' || g || '.myshopify.com/orders%2Fcreate',
                'wh_' || g, 'orders/create', 'orders/create', 'done', 'applied', now()
         FROM generate_series(1, 200000) g
         RETURNING id)
       INSERT INTO receipt_payloads (receipt_id, payload) SELECT id, '{}' FROM scoped"
db -c "VACUUM (ANALYZE)"
echo "  seeded in $(( $(date +%s) - started )) s; $(db -c "SELECT pg_size_pretty(pg_database_size(current_database()))")"

log="$bench_work/console.log"
"$bench_bin/inboundctl" console --database-url "$url" --by bench --listen 127.0.0.1:0 >"$log" 2>&1 &
bench_pids+=("$!")
for _ in $(seq 1 100); do grep -q "console listening on" "$log" && break; sleep 0.1; done
base=$(sed -n 's/^console listening on //p' "$log")

# Receipt n's id (bench_seed_history): its day's, then 1,000,000 + n.
mid_n=$((receipts / 2))
mid=$(db -c "SELECT id FROM receipts WHERE event_id = 'evt_$mid_n' LIMIT 1")
effect_mid=$(db -c "SELECT id FROM effects WHERE id % 10000000000 = $((effects / 2))")
failed_id=$(db -c "SELECT id FROM receipts WHERE status = 'failed' AND event_id <> 'evt_deep' ORDER BY id DESC LIMIT 1")
deep_id=$(db -c "SELECT id FROM receipts WHERE event_id = 'evt_deep'")
deep_bytes=$(db -c "SELECT octet_length(payload::text) FROM receipt_payloads WHERE receipt_id = $deep_id")
review_id=$(db -c "SELECT id FROM effects WHERE status = 'review' ORDER BY id DESC LIMIT 1")
pages=(
  "overview|/"
  "review queue|/review"
  "receipts: failed, newest|/receipts?status=failed"
  "receipts: failed, one integration|/receipts?status=failed&integration=stripe-eu"
  "receipts: pending|/receipts?status=pending"
  "receipts: done, newest|/receipts?status=done"
  "receipts: done, a page deep in the table|/receipts?status=done&before=$mid"
  "receipts: done, integration and type|/receipts?status=done&integration=stripe-live&type=charge.refunded"
  "receipts: by provider event id|/receipts?event_id=evt_$mid_n"
  "one receipt (done)|/receipts/$mid"
  "one receipt (failed, audited)|/receipts/$failed_id"
  "one receipt: the worst payload the ingress accepts ($deep_bytes bytes, 62 levels deep)|/receipts/$deep_id"
  "receipts: by provider event id, with 200,000 more scopes|/receipts?event_id=wh_123456"
  "effects: review|/effects?status=review"
  "effects: completed, newest|/effects?status=completed"
  "effects: completed, one sink, deep|/effects?status=completed&sink=crm&before=$effect_mid"
  "one effect|/effects/$review_id"
  "receipts: done, a type never sent (one window of 200,000 ids)|/receipts?status=done&type=never.sent"
  "receipts: done, accepted before 30 h ago (one window of 200,000 ids)|/receipts?status=done&until=30h"
  "effects: completed, a sink never used (one window)|/effects?status=completed&sink=nowhere"
  "a subject's timeline: 1,000 receipts of cus_hot (newest 200 a page)|/subject?integration=stripe-live&subject=cus_hot"
)
echo
echo "| page | median ms | max ms (of $runs) |"
echo "|---|---:|---:|"
for entry in "${pages[@]}"; do
  name=${entry%%|*}
  path=${entry#*|}
  curl -s -o /dev/null "$base$path"
  times=$(for _ in $(seq 1 $runs); do
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$base$path"
  done)
  if grep -qv '^200 ' <<<"$times"; then
    echo "$name: not 200: $(grep -v '^200 ' <<<"$times" | head -1)" >&2
    exit 1
  fi
  awk -v name="$name" '{ t[NR] = $2 * 1000 } END {
      n = asort(t); printf "| %s | %.1f | %.1f |\n", name, t[int((n + 1) / 2)], t[n] }' <<<"$times"
done

# What `inboundctl status` costs beside the pages (a process each time, as on call).
times=$(for _ in $(seq 1 $runs); do
  /usr/bin/time -f '%e' "$bench_bin/inboundctl" status --database-url "$url" 2>&1 >/dev/null | tail -1
done)
awk '{ t[NR] = $1 * 1000 } END {
    n = asort(t); printf "| inboundctl status (a process) | %.1f | %.1f |\n", t[int((n + 1) / 2)], t[n] }' <<<"$times"
# A subject's whole timeline, 1,000 receipts (bench_seed_history's cus_hot), as on call.
times=$(for _ in $(seq 1 $runs); do
  /usr/bin/time -f '%e' "$bench_bin/inboundctl" subject show stripe-live cus_hot --limit 1000 \
    --json --database-url "$url" 2>&1 >/dev/null | tail -1
done)
awk '{ t[NR] = $1 * 1000 } END {
    n = asort(t); printf "| inboundctl subject show, 1,000 receipts (a process) | %.1f | %.1f |\n", t[int((n + 1) / 2)], t[n] }' <<<"$times"

echo
echo "== plans (EXPLAIN ANALYZE) of the statements the pages lean on"
explain() { # title sql
  echo "-- $1"
  db -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) $2" | grep -vE '^\s*(Planning|Buffers)' | sed 's/^/    /'
}
explain "receipts: status done, integration and type (list_receipts)" \
  "SELECT id FROM receipts WHERE status = 'done' AND integration = ANY ('{stripe-live}') AND event_type = 'charge.refunded' ORDER BY id DESC LIMIT 50"
explain "receipts: a page deep in the table (list_receipts, before)" \
  "SELECT id FROM receipts WHERE status = 'done' AND id < $mid ORDER BY id DESC LIMIT 50"
explain "review queue: receipts by reason (receipt_review_groups)" \
  "SELECT integration, status, left(coalesce(outcome_reason, last_error), 160), count(*), min(id), min(received_at) FROM receipts WHERE status IN ('failed', 'quarantined') GROUP BY 1, 2, 3 ORDER BY min(received_at) LIMIT 100"
explain "review queue: effects by reason (effect_review_groups)" \
  "SELECT sink, status, left(coalesce(last_error, ''), 160), count(*), min(id), min(created_at) FROM effects WHERE status IN ('review', 'failed') GROUP BY 1, 2, 3 ORDER BY min(created_at) LIMIT 100"
explain "overview: what the newest receipts say per integration (recent_receipts)" \
  "SELECT integration, max(received_at), count(*) FILTER (WHERE outcome = 'ignored'), count(*) FROM (SELECT integration, received_at, outcome FROM receipts ORDER BY id DESC LIMIT 100000) newest GROUP BY integration"
explain "receipts: done, a type never sent, one window (list_receipts with after_id)" \
  "SELECT id FROM receipts WHERE status = 'done' AND event_type = 'never.sent' AND id < $mid AND id > $mid - 200000 ORDER BY id DESC LIMIT 50"
explain "receipts: by provider event id (receipts_by_event_id, one lookup of its index)" \
  "SELECT id FROM receipts WHERE event_id = 'wh_123456' ORDER BY id"
explain "one receipt's payload excerpt (receipt_payload_excerpt: rendered once, cut, never pretty-printed)" \
  "SELECT left(rendered.text, 65536), length(rendered.text) > 65536, octet_length(rendered.text) FROM receipt_payloads p, LATERAL (SELECT p.payload::text AS text OFFSET 0) rendered WHERE p.receipt_id = $deep_id"
explain "a subject's timeline: its newest 1,000 receipts (subject_timeline, receipts_by_subject)" \
  "SELECT id FROM (SELECT * FROM receipts WHERE integration = 'stripe-live' AND subject = 'cus_hot' ORDER BY id DESC LIMIT 1001) r LEFT JOIN receipt_queue q ON q.receipt_id = r.id"
explain "one receipt's audit trail (receipt_history)" \
  "SELECT replayed_at FROM receipt_replays WHERE receipt_id = $failed_id UNION ALL SELECT resolved_at FROM receipt_resolutions WHERE receipt_id = $failed_id"

if [ "${BENCH_CONSOLE_KEEP:-0}" = 1 ]; then
  echo "kept: $url"
else
  psql -q "$bench_admin_url" -c "DROP DATABASE inbound_bench_console WITH (FORCE)" >/dev/null
fi
