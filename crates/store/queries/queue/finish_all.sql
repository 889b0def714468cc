-- Records the terminal states of a whole batch in one statement, inside the business
-- transaction, after the fenced dequeue of the batch. A quarantined ordered receipt holds
-- its subject, and says so in subject_leases too (queue/finish.sql says why).
-- Uses: receipts by primary key; subject_leases by its key. Locks: those receipt rows, and
--   the lease rows of the subjects they hold, in subject order.
-- Durable: joins the `durable` CTE (store::DURABLE) — a `done` rests on this commit.
WITH durable AS (
    SELECT set_config('synchronous_commit', 'on', true)
    WHERE current_setting('synchronous_commit') IN ('off', 'local')
), finished AS (
    UPDATE receipts r
    SET status = f.status, outcome = f.outcome, outcome_reason = f.reason,
        attempts = f.attempts, finished_at = now()
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int4[])
         AS f(receipt_id, status, outcome, reason, attempts)
         LEFT JOIN durable ON true -- a durable `done` (store::DURABLE)
    WHERE r.id = f.receipt_id
    RETURNING r.integration, r.subject, r.ordered, r.status
), held AS (
    INSERT INTO subject_leases (integration, subject, lease_token, leased_until)
    SELECT DISTINCT integration, subject, 0::int8, 'infinity'::timestamptz FROM finished
    WHERE ordered AND status = 'quarantined'
    ORDER BY integration, subject
    ON CONFLICT (integration, subject) DO UPDATE SET lease_token = 0, leased_until = 'infinity'
)
SELECT count(*) AS "finished!" FROM finished
