-- Claims visible receipts for a worker: leases up to $1 of them (within the payload-byte
-- budget $5; one larger alone when $7) for $2 ms with a fresh lease token, and fails in
-- the same statement a visible receipt whose $6 attempts are spent (a crash loop ends).
-- Returns claimed rows (exhausted = false) and failed ones (exhausted = true), in
-- claim order. Payloads are read afterwards (queue/payloads.rs), so none can fail this.
-- Uses: receipt_queue_claimable (visible_at, receipt_id); receipts by primary key.
-- Locks: the claimed queue rows, FOR UPDATE SKIP LOCKED (MATERIALIZED with LIMIT: never
--   more than are claimed), and the receipts it fails.
WITH locked AS MATERIALIZED (
    -- MATERIALIZED with LIMIT: exactly these rows are locked, never more.
    SELECT receipt_id, attempts, payload_bytes, visible_at,
           leased_by IS NOT NULL AS reclaimed
    FROM receipt_queue
    WHERE visible_at <= coalesce($8, now())
      AND ($4::text[] IS NULL OR integration = ANY ($4))
    ORDER BY visible_at, receipt_id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), exhausted AS (
    DELETE FROM receipt_queue q USING locked l
    WHERE q.receipt_id = l.receipt_id AND l.attempts >= $6
    RETURNING q.receipt_id, q.attempts, q.last_error
), failed AS (
    UPDATE receipts r
    SET status = 'failed', attempts = e.attempts, finished_at = coalesce($8, now()),
        last_error = format(
            'attempt %s of %s never recorded an outcome (its worker stopped or hung)%s',
            e.attempts, $6::int4, coalesce('; last error: ' || e.last_error, ''))
    FROM exhausted e WHERE r.id = e.receipt_id
    RETURNING r.id, r.integration, r.event_id, e.attempts
), sized AS (
    -- The byte budget counts receipts in claim order; the rest stay unclaimed.
    SELECT receipt_id, reclaimed, sum(payload_bytes) OVER claim_order AS running_bytes,
           row_number() OVER claim_order AS position
    FROM locked WHERE attempts < $6
    WINDOW claim_order AS (ORDER BY visible_at, receipt_id)
), claimed AS (
    UPDATE receipt_queue q
    SET visible_at = coalesce($8, now()) + $2::int8 * interval '1 millisecond',
        attempts = q.attempts + 1,
        -- From the sequence, and past the row's own token in any case (a worker of
        -- the previous version, mid-upgrade, still counts up per row).
        lease_token = GREATEST(nextval('receipt_lease_tokens'), q.lease_token + 1),
        leased_by = $3,
        leased_at = coalesce($8, now())
    FROM sized s
    WHERE q.receipt_id = s.receipt_id
      AND (s.running_bytes <= $5 OR (s.position = 1 AND $7))
    RETURNING q.receipt_id, q.lease_token, q.attempts, s.reclaimed, q.payload_bytes
)
SELECT false AS "exhausted!", c.receipt_id AS "receipt_id!: ReceiptId",
       c.lease_token AS "lease_token!: LeaseToken", c.attempts AS "attempts!",
       c.reclaimed AS "reclaimed!", r.integration AS "integration!",
       r.source_scope AS "source_scope!", r.event_id AS "event_id!",
       r.event_type AS "event_type!", r.route_key AS "route_key!",
       r.delivery AS "delivery?: serde_json::Value",
       c.payload_bytes AS "payload_bytes!", r.received_at AS "received_at!"
FROM claimed c JOIN receipts r ON r.id = c.receipt_id
UNION ALL
SELECT true, f.id, 0, f.attempts, false, f.integration, '', f.event_id, '', '',
       NULL::jsonb, 0, coalesce($8, now())
FROM failed f
ORDER BY 2 -- receipt_id: claim order, exhausted ones among them
