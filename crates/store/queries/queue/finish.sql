-- Records one receipt's terminal state inside its business transaction, after the fenced
-- dequeue (the lease is already proven).
-- Uses: receipts by primary key. Locks: that receipt row.
-- Durable: joins the `durable` CTE (store::DURABLE) — a `done` rests on this commit.
WITH durable AS (
    SELECT set_config('synchronous_commit', 'on', true)
    WHERE current_setting('synchronous_commit') IN ('off', 'local')
)
UPDATE receipts
SET status = $2, outcome = $3, outcome_reason = $4, attempts = $5, finished_at = now()
FROM (SELECT) AS one LEFT JOIN durable ON true -- a durable `done` (store::DURABLE)
WHERE id = $1
