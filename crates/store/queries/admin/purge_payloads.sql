-- Drops the payloads of up to $2 done receipts finished more than $1 days ago, oldest
-- first, except a receipt with an effect not closed ($3: the closed states).
-- Uses: receipts_payload_held (finished_at) WHERE done and holding a payload.
-- Locks: one batch of receipt rows, FOR UPDATE SKIP LOCKED (workers and operators pass).
WITH old AS MATERIALIZED (
    -- MATERIALIZED with LIMIT: exactly one batch is locked, oldest first; SKIP
    -- LOCKED passes over a receipt a worker or operator holds.
    SELECT r.id FROM receipts r
    WHERE r.status = 'done' AND r.payload IS NOT NULL
      AND r.finished_at < coalesce($4, now()) - make_interval(days => $1)
      -- The person deciding about an open effect reads the event behind it.
      AND NOT EXISTS (
          SELECT 1 FROM effects e
          WHERE e.receipt_id = r.id AND e.status <> ALL ($3)
      )
    ORDER BY r.finished_at LIMIT $2
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE receipts r SET payload = NULL FROM old WHERE r.id = old.id
