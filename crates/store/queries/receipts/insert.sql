-- Accepts a batch of receipts in one autocommitted statement (the ingress's group commit;
-- `stripe backfill` stores through the database's `backfill_receipts` instead): each new
-- receipt key gets its receipt, its payload and its queue row, a key already held gets
-- nothing; returns the input position and id of each new one. $9 is the clock (NULL:
-- now()), which decides the key period (tests move it). $10–$12 are each receipt's
-- subject, event time and whether its route is ordered (an ordered receipt's queue row
-- names its subject and its place in the subject's order).
-- Uses: receipt_keys' primary key (and receipt_keys_content for a content_dedupe
--   integration) in this key period and the previous one (claim_receipt_keys); no scan.
-- Locks: the inserted rows, and the key-index entries of conflicting keys until commit,
--   taken in receipt-key order, so two batches never deadlock on a receipt key.
-- Durable: joins the `durable` CTE (store::DURABLE) — a 2xx rests on this commit.
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::bytea[], $8::text[], $10::text[],
                         $11::timestamptz[], $12::bool[])
        WITH ORDINALITY AS input (integration, source_scope, event_id, event_type,
                                  route_key, payload, content_digest, delivery,
                                  subject, event_at, ordered, position)
), new AS (
    -- A repeated content key (content_dedupe) is a duplicate too — and since that key
    -- has its own order, two batches can still deadlock on it; the group commit then
    -- commits their members one by one.
    SELECT * FROM claim_receipt_keys($1, $2, $3, $7, $9)
), inserted AS (
    -- (The ingress's role inserts only these columns: the id is the day's and the
    -- sequence's, so no insert can take one a later receipt needs.)
    INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                          content_digest, delivery, subject, event_at, ordered)
    SELECT input.integration, input.source_scope, input.event_id, input.event_type,
           input.route_key, input.content_digest, input.delivery::jsonb, input.subject,
           input.event_at, input.ordered AND input.subject IS NOT NULL
    FROM input JOIN new USING (source_scope, event_id)
    ORDER BY input.source_scope, input.event_id
    RETURNING id, integration, source_scope, event_id, received_at
), stored AS (
    INSERT INTO receipt_payloads (receipt_id, payload)
    SELECT inserted.id, input.payload::jsonb
    FROM inserted JOIN input USING (source_scope, event_id)
), queued AS (
    INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at,
                               payload_bytes, subject, ordered_at)
    SELECT inserted.id, inserted.integration, inserted.received_at,
           inserted.received_at, octet_length(input.payload),
           CASE WHEN input.ordered THEN input.subject END,
           CASE WHEN input.ordered AND input.subject IS NOT NULL
                THEN coalesce(input.event_at, inserted.received_at) END
    FROM inserted JOIN input USING (source_scope, event_id)
), durable AS (
    SELECT set_config('synchronous_commit', 'on', true)
    WHERE current_setting('synchronous_commit') IN ('off', 'local')
)
SELECT input.position AS "position!", inserted.id AS "id!"
FROM inserted JOIN input USING (source_scope, event_id)
-- The commit behind a 2xx is durable whatever the session says (store::DURABLE).
LEFT JOIN durable ON true
