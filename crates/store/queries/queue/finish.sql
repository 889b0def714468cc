-- Records one receipt's terminal state inside its business transaction, after the fenced
-- dequeue (the lease is already proven). A quarantined ordered receipt holds its subject,
-- and says so in subject_leases too (a row that never expires): a claim that waited for
-- this transaction reads the latest row there, where it cannot read the receipt's state.
-- Uses: receipts by primary key; subject_leases by its key. Locks: that receipt row, and
--   the subject's lease row when it holds it.
-- Durable: joins the `durable` CTE (store::DURABLE) — a `done` rests on this commit.
WITH durable AS (
    SELECT set_config('synchronous_commit', 'on', true)
    WHERE current_setting('synchronous_commit') IN ('off', 'local')
), finished AS (
    UPDATE receipts
    SET status = $2, outcome = $3, outcome_reason = $4, attempts = $5, finished_at = now()
    FROM (SELECT) AS one LEFT JOIN durable ON true -- a durable `done` (store::DURABLE)
    WHERE id = $1
    RETURNING integration, subject, ordered, status
), held AS (
    INSERT INTO subject_leases (integration, subject, lease_token, leased_until)
    SELECT integration, subject, 0, 'infinity' FROM finished
    WHERE ordered AND status = 'quarantined'
    ON CONFLICT (integration, subject) DO UPDATE SET lease_token = 0, leased_until = 'infinity'
)
SELECT count(*) AS "finished!" FROM finished
