-- Records the terminal states of a whole batch in one statement, inside the business
-- transaction, after the fenced dequeue of the batch.
-- Uses: receipts by primary key. Locks: those receipt rows.
-- Durable: joins the `durable` CTE (store::DURABLE) — a `done` rests on this commit.
WITH durable AS (
    SELECT set_config('synchronous_commit', 'on', true)
    WHERE current_setting('synchronous_commit') IN ('off', 'local')
)
UPDATE receipts r
SET status = f.status, outcome = f.outcome, outcome_reason = f.reason,
    attempts = f.attempts, finished_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int4[])
     AS f(receipt_id, status, outcome, reason, attempts)
     LEFT JOIN durable ON true -- a durable `done` (store::DURABLE)
WHERE r.id = f.receipt_id
