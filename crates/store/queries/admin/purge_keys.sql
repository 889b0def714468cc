-- Deletes up to $2 done receipt rows (their keys) finished more than $1 days ago, oldest
-- first, keeping any with an effect not closed ($3) or a queue row; the cascade deletes
-- only closed effects and their history.
-- Uses: receipts_finished (finished_at) WHERE done; effects_by_receipt; receipt_queue's
--   primary key.
-- Locks: one batch of receipt rows, FOR UPDATE SKIP LOCKED, then the cascade's rows.
WITH old AS MATERIALIZED (
    -- MATERIALIZED with LIMIT: exactly one batch is locked, oldest first; SKIP
    -- LOCKED passes over a receipt a worker or operator holds.
    SELECT r.id FROM receipts r
    WHERE r.status = 'done'
      AND r.finished_at < coalesce($4, now()) - make_interval(days => $1)
      AND NOT EXISTS (
          SELECT 1 FROM effects e
          WHERE e.receipt_id = r.id AND e.status <> ALL ($3)
      )
      -- A done receipt has no queue row; were one there, deleting the receipt
      -- would strand it (no foreign key: migration 0004).
      AND NOT EXISTS (SELECT 1 FROM receipt_queue q WHERE q.receipt_id = r.id)
    ORDER BY r.finished_at LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM receipts r USING old WHERE r.id = old.id
