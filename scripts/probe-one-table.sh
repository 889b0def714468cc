#!/usr/bin/env bash
# Would one table beat two? Measures, side by side in alternating rounds, our schema
# (`receipts` + `receipt_queue`) against the same schema with the queue folded into
# `receipts` (lease columns on the receipt; partial claim and age indexes WHERE status =
# 'pending'; the status index limited to failed and quarantined):
#   insert    the ingress's group-commit statement, 16 receipts of ~1 KB per statement,
#             pgbench -c 1 (one committer, as the ingress runs) and -c 2
#   worker    claim 50 (lease them, read their payloads), then in a second transaction fence
#             on the lease token and mark them done, pgbench -c 2, over a backlog of
#             PROBE_BACKLOG pending receipts
# The worker side is what the one table costs: its claim rewrites the wide receipt row
# (payload included) where ours rewrites a narrow queue row. Not part of `make bench`
# (BENCHMARKS.md records a run); needs release binaries (`make release`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
trap bench_cleanup EXIT
seconds="${PROBE_SECONDS:-15}"
rounds="${PROBE_ROUNDS:-2}"
backlog="${PROBE_BACKLOG:-400000}"

two=$(bench_db inbound_probe_two)
one=$(bench_db inbound_probe_one)
psql -q -v ON_ERROR_STOP=1 "$one" <<'SQL'
DROP TABLE receipt_queue;
ALTER TABLE receipts
    ADD COLUMN visible_at    timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN enqueued_at   timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN lease_token   bigint      NOT NULL DEFAULT 0,
    ADD COLUMN leased_by     text,
    ADD COLUMN leased_at     timestamptz,
    ADD COLUMN payload_bytes integer     NOT NULL DEFAULT 0;
DROP INDEX receipts_status_received;
CREATE INDEX receipts_status_received ON receipts (status, received_at)
    WHERE status IN ('failed', 'quarantined');
CREATE INDEX receipts_claimable ON receipts (visible_at, id) WHERE status = 'pending';
CREATE INDEX receipts_pending_age ON receipts (integration, enqueued_at) WHERE status = 'pending';
SQL

# The ingress's statement (store/receipts.rs) over 16 generated receipts; in `one` the
# payload's size goes on the receipt instead of a queue row.
note=$(printf 'x%.0s' $(seq 1 700))
input="WITH input AS (
  SELECT 'stripe-bench' AS integration, 'stripe-bench/platform/test' AS source_scope,
         'evt_' || (random() * 4e12)::bigint AS event_id, 'payment_intent.succeeded' AS event_type,
         'payment_intent.succeeded' AS route_key, g AS position,
         '{\"id\":\"evt\",\"type\":\"payment_intent.succeeded\",\"livemode\": false,\"data\":{\"object\":{\"id\":\"pi_1\",\"amount_received\":2000,\"metadata\":{\"order_id\":\"o1\",\"note\":\"$note\"}}}}'::text AS payload
  FROM generate_series(1, 16) g
)"
cat > "$bench_work/insert-two.sql" <<SQL
$input, inserted AS (
  INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, payload)
  SELECT integration, source_scope, event_id, event_type, route_key, payload::jsonb
  FROM input ORDER BY source_scope, event_id ON CONFLICT DO NOTHING
  RETURNING id, integration, source_scope, event_id, received_at
), queued AS (
  INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes)
  SELECT inserted.id, inserted.integration, inserted.received_at, inserted.received_at,
         octet_length(input.payload)
  FROM inserted JOIN input USING (source_scope, event_id)
)
SELECT input.position, inserted.id FROM inserted JOIN input USING (source_scope, event_id);
SQL
cat > "$bench_work/insert-one.sql" <<SQL
$input, inserted AS (
  INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key, payload,
                        payload_bytes)
  SELECT integration, source_scope, event_id, event_type, route_key, payload::jsonb,
         octet_length(payload)
  FROM input ORDER BY source_scope, event_id ON CONFLICT DO NOTHING
  RETURNING id, source_scope, event_id
)
SELECT input.position, inserted.id FROM inserted JOIN input USING (source_scope, event_id);
SQL
# Claim 50, then fence and finish them; the claim's ids and tokens reach the second
# transaction as array literals (pgbench's \gset keeps one row). Both variants lease with
# the same assignments, to the row aliased `leased`.
lease="SET visible_at = now() + interval '60 seconds', attempts = leased.attempts + 1,
      lease_token = nextval('receipt_lease_tokens'), leased_by = 'probe' || :client_id,
      leased_at = now()"
cat > "$bench_work/worker-two.sql" <<SQL
WITH locked AS MATERIALIZED (
  SELECT receipt_id FROM receipt_queue WHERE visible_at <= now()
  ORDER BY visible_at, receipt_id LIMIT 50 FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE receipt_queue leased $lease
  FROM locked l WHERE leased.receipt_id = l.receipt_id
  RETURNING leased.receipt_id, leased.lease_token
)
SELECT 'ARRAY[' || string_agg(c.receipt_id::text, ',') || ']::bigint[]' AS ids,
       'ARRAY[' || string_agg(c.lease_token::text, ',') || ']::bigint[]' AS tokens,
       sum(length(r.payload::text)) AS bytes
FROM claimed c JOIN receipts r ON r.id = c.receipt_id \gset
BEGIN;
WITH fenced AS (
  DELETE FROM receipt_queue q USING unnest(:ids, :tokens) AS f(receipt_id, lease_token)
  WHERE q.receipt_id = f.receipt_id AND q.lease_token = f.lease_token
  RETURNING q.receipt_id
)
UPDATE receipts r SET status = 'done', outcome = 'applied', attempts = 1, finished_at = now()
FROM fenced WHERE r.id = fenced.receipt_id;
COMMIT;
SQL
cat > "$bench_work/worker-one.sql" <<SQL
WITH locked AS MATERIALIZED (
  SELECT id FROM receipts WHERE status = 'pending' AND visible_at <= now()
  ORDER BY visible_at, id LIMIT 50 FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE receipts leased $lease
  FROM locked l WHERE leased.id = l.id
  RETURNING leased.id, leased.lease_token, leased.payload
)
SELECT 'ARRAY[' || string_agg(c.id::text, ',') || ']::bigint[]' AS ids,
       'ARRAY[' || string_agg(c.lease_token::text, ',') || ']::bigint[]' AS tokens,
       sum(length(c.payload::text)) AS bytes
FROM claimed c \gset
BEGIN;
UPDATE receipts r SET status = 'done', outcome = 'applied', attempts = 1, finished_at = now()
FROM unnest(:ids, :tokens) AS f(receipt_id, lease_token)
WHERE r.id = f.receipt_id AND r.lease_token = f.lease_token AND r.status = 'pending';
COMMIT;
SQL

# rate URL SCRIPT CLIENTS ROWS: rows per second (transactions per second × ROWS), measured
# on a settled database (vacuumed, checkpointed), so that neither variant pays for the
# other's dead rows or dirty pages. A failed pgbench (a worker run that found no backlog
# makes its array literals empty) stops the probe.
rate() {
  local output
  psql -q "$1" -c "VACUUM" -c "CHECKPOINT" >/dev/null
  output=$(pgbench -n -c "$3" -j "$3" -T "$seconds" -f "$2" "$1")
  awk -v rows="$4" '/^tps = / { printf "%.0f", $3 * rows; exit }' <<<"$output"
}
# Pending receipts left in URL, in either layout.
pending() {
  psql -Atq "$1" -c "SELECT count(*) FROM receipts WHERE status = 'pending'"
}
# The backlog the worker runs drain; the insert runs add to it as they go.
pgbench -n -t $((backlog / 16)) -f "$bench_work/insert-two.sql" "$two" >/dev/null
pgbench -n -t $((backlog / 16)) -f "$bench_work/insert-one.sql" "$one" >/dev/null
printf '%-6s %-22s %10s %10s\n' round measure two-tables one-table
for round in $(seq 1 "$rounds"); do
  for measure in "insert -c 1:insert:1:16" "insert -c 2:insert:2:16" "worker -c 2:worker:2:50"; do
    IFS=: read -r label script clients rows <<<"$measure"
    # Each round, the other variant goes first.
    if [ $((round % 2)) = 1 ]; then
      two_rate=$(rate "$two" "$bench_work/$script-two.sql" "$clients" "$rows")
      one_rate=$(rate "$one" "$bench_work/$script-one.sql" "$clients" "$rows")
    else
      one_rate=$(rate "$one" "$bench_work/$script-one.sql" "$clients" "$rows")
      two_rate=$(rate "$two" "$bench_work/$script-two.sql" "$clients" "$rows")
    fi
    printf '%-6s %-22s %10s %10s\n' "$round" "$label rows/s" "$two_rate" "$one_rate"
  done
done
# With 100 (two clients × 50) still pending at the end, every claim found a full batch.
for url in "$two" "$one"; do
  left=$(pending "$url")
  [ "$left" -ge 100 ] || { echo "probe: the backlog ran out ($left left); raise PROBE_BACKLOG" >&2; exit 1; }
done
