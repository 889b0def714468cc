#!/usr/bin/env bash
# `make bench-memory` (and part of `make bench`): peak RSS of each role under the inputs
# that used to exhaust it. A benchmark, not a test.
#
#   ingress  16 concurrent 1 MB bodies, each byte sent as its own chunk
#   worker   draining 2,000 pending receipts of ~500 KB each (Stripe-shaped, with a
#            1,900-line array), default flags
#
# usage: bench-memory.sh [RESULTS.json]   (records into RESULTS.json when given)
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-}"
DATABASE_URL=$(scripts/ensure-postgres.sh)
export DATABASE_URL
cargo build --quiet --release -p inbound-ingress -p inbound-stock-worker -p inboundctl
# shellcheck source=bench/lib.sh
source bench/lib.sh
trap bench_cleanup EXIT
record() {
  echo "bench-memory: $1 = $2" >&2
  [ -z "$results" ] || bench_record "$results" "$1" "$2"
}

echo "bench-memory: ingress, 16 × 1 MB bodies in 1-byte chunks" >&2
url=$(bench_db inbound_bench_memory)
bench_start_ingress "$url" 18085 19097
record ingress_idle_rss "$(awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$bench_ingress_pid/status")"
answers=$(python3 bench/chunked-flood.py 127.0.0.1 18085 /webhooks/stripe-bench 16 1000000)
record ingress_chunked_answers "$answers"
record ingress_chunked_rss "$(bench_rss_mib "$bench_ingress_pid")"
kill "$bench_ingress_pid"

echo "bench-memory: worker, 2,000 receipts of ~500 KB" >&2
receipts=2000
url=$(bench_db inbound_bench_memory)
psql -Atq "$url" -c "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency)
     SELECT 'bench', 'o' || n, 'pi_' || n, 2000, 'usd' FROM generate_series(1, $receipts) n" \
  -c "WITH lines AS (
         SELECT jsonb_agg(jsonb_build_object('id', 'li_' || k, 'object', 'line_item', 'amount', k,
                  'currency', 'usd', 'description', 'Line ' || k || ' ' || repeat('d', 120),
                  'price', jsonb_build_object('id', 'price_' || (k % 7), 'unit_amount', k % 1000))) AS items
         FROM generate_series(1, 1900) k
       ), input AS (
         SELECT n, jsonb_build_object('id', 'evt_' || n, 'type', 'payment_intent.succeeded', 'livemode', false,
                  'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || n, 'object', 'payment_intent',
                    'status', 'succeeded', 'amount_received', 2000, 'currency', 'usd',
                    'metadata', jsonb_build_object('order_id', 'o' || n), 'lines', lines.items))) AS payload
         FROM generate_series(1, $receipts) n, lines
       ), inserted AS (
         INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key)
         SELECT 'stripe-bench', 'stripe-bench/platform/test', 'evt_' || n, 'payment_intent.succeeded',
                'payment_intent.succeeded'
         FROM input ORDER BY n
         RETURNING id, integration, event_id, received_at
       ), stored AS (
         INSERT INTO receipt_payloads (receipt_id, payload)
         SELECT inserted.id, input.payload FROM inserted JOIN input ON inserted.event_id = 'evt_' || input.n
       )
       INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes)
       SELECT inserted.id, inserted.integration, inserted.received_at, inserted.received_at,
              octet_length(input.payload::text)
       FROM inserted JOIN input ON inserted.event_id = 'evt_' || input.n" -c "VACUUM ANALYZE" >/dev/null
record worker_payload_kib "$(psql -Atq "$url" -c "SELECT round(avg(payload_bytes) / 1024) FROM receipt_queue")"
started=$(bench_now)
bench_start_worker "$url" 19198 bench-memory
elapsed=$(bench_seconds_until_done "$url" "SELECT count(*) FROM receipt_queue" \
  "SELECT EXTRACT(EPOCH FROM max(finished_at)) FROM receipts" "$started")
record worker_large_rss "$(bench_rss_mib "$bench_worker_pid")"
record worker_large_secs "$(python3 -c "print(round($elapsed, 1))")"
applied=$(psql -Atq "$url" -c "SELECT count(*) FROM receipts WHERE outcome = 'applied'")
[ "$applied" = "$receipts" ] || { echo "bench-memory: only $applied of $receipts applied" >&2; exit 1; }
kill -TERM "$bench_worker_pid"
