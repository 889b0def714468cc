-- Claims visible receipts for a worker: leases up to $1 of them (within the payload-byte
-- budget $5; one larger alone when $7) for $2 ms with a fresh lease token, and fails in
-- the same statement a visible receipt whose $6 attempts are spent (a crash loop ends).
-- Unordered receipts are taken oldest first; of an ordered subject only its first queue
-- row (its head, in event-time then arrival order), only when the head is due and its
-- subject's subject_leases row is neither a live lease nor a hold (a failed or
-- quarantined receipt of the subject) — and then under that row, taken here with the
-- receipt's token. The subjects are walked from the cursor ($9, $10: where this worker's
-- last walk stopped) to the end and round to it again, at most $1 + 100 a claim, so every
-- subject gets its turn. Returns the claimed rows (kind `claimed`), the failed ones
-- (`exhausted`) and where the walk stopped (`walked_to`, at most one), in claim order.
-- Payloads are read afterwards
-- (queue/payloads.rs), so none can fail this.
-- Uses: receipt_queue_claimable (visible_at, receipt_id) WHERE subject IS NULL;
--   receipt_queue_subject_order, one descent per queued subject walked (a loose index
--   scan, at most $1 + 100 subjects); subject_leases by its key per head;
--   receipts by primary key.
-- Locks: the claimed queue rows, FOR UPDATE SKIP LOCKED (MATERIALIZED with LIMIT: never
--   more than are claimed), then the claimed subjects' subject_leases rows in subject
--   order (a business transaction takes the same two in the same order), and the
--   receipts it fails.
WITH RECURSIVE unordered AS MATERIALIZED (
    -- MATERIALIZED with LIMIT: exactly these rows are locked, never more.
    SELECT receipt_id, integration, subject, attempts, payload_bytes, visible_at,
           lease_token, leased_by IS NOT NULL AS reclaimed
    FROM receipt_queue
    WHERE subject IS NULL AND visible_at <= coalesce($8, now())
      AND ($4::text[] IS NULL OR integration = ANY ($4))
    ORDER BY visible_at, receipt_id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), heads_after AS (
    -- Each queued subject's first row, in subject order after the cursor …
    (SELECT q.integration, q.subject, q.receipt_id, q.visible_at, 1 AS lap, 1 AS step
     FROM receipt_queue q
     WHERE q.subject IS NOT NULL
       AND (q.integration, q.subject) > (coalesce($9::text, ''), coalesce($10::text, ''))
     ORDER BY q.integration, q.subject, q.ordered_at, q.receipt_id
     LIMIT 1)
    UNION ALL
    (SELECT next.integration, next.subject, next.receipt_id, next.visible_at, 1, h.step + 1
     FROM heads_after h CROSS JOIN LATERAL (
         SELECT q.integration, q.subject, q.receipt_id, q.visible_at
         FROM receipt_queue q
         WHERE q.subject IS NOT NULL AND (q.integration, q.subject) > (h.integration, h.subject)
         ORDER BY q.integration, q.subject, q.ordered_at, q.receipt_id
         LIMIT 1) next
     WHERE h.step < $1 + 100)
), heads_before AS (
    -- … then from the first subject up to the cursor: one full turn.
    (SELECT q.integration, q.subject, q.receipt_id, q.visible_at, 2 AS lap, 1 AS step
     FROM receipt_queue q
     WHERE q.subject IS NOT NULL
       AND (q.integration, q.subject) <= (coalesce($9::text, ''), coalesce($10::text, ''))
     ORDER BY q.integration, q.subject, q.ordered_at, q.receipt_id
     LIMIT 1)
    UNION ALL
    (SELECT next.integration, next.subject, next.receipt_id, next.visible_at, 2, h.step + 1
     FROM heads_before h CROSS JOIN LATERAL (
         SELECT q.integration, q.subject, q.receipt_id, q.visible_at
         FROM receipt_queue q
         WHERE q.subject IS NOT NULL AND (q.integration, q.subject) > (h.integration, h.subject)
         ORDER BY q.integration, q.subject, q.ordered_at, q.receipt_id
         LIMIT 1) next
     WHERE h.step < $1 + 100
       AND (next.integration, next.subject) <= (coalesce($9::text, ''), coalesce($10::text, '')))
), walked AS (
    -- At most $1 + 100 subjects a claim, read lazily: those that cannot run now (leased,
    -- waiting, held) cost one descent each, and the next claim walks on from the last.
    SELECT * FROM heads_after UNION ALL SELECT * FROM heads_before
    LIMIT $1 + 100
), runnable_heads AS MATERIALIZED (
    -- Read in walk order: the walk stops once $1 heads could run.
    SELECT w.receipt_id, w.integration, w.subject, w.lap, w.step FROM walked w
    WHERE w.visible_at <= coalesce($8, now())
      AND ($4::text[] IS NULL OR w.integration = ANY ($4))
      -- Leased now, or held (a held subject's row never expires).
      AND NOT EXISTS (SELECT 1 FROM subject_leases l
                      WHERE l.integration = w.integration AND l.subject = w.subject
                        AND l.leased_until > coalesce($8, now()))
    LIMIT $1
), walked_to AS (
    -- Where the next claim resumes: after the last head taken when $1 were (the walk
    -- stopped there), else after the last subject walked.
    (SELECT integration, subject FROM runnable_heads
     WHERE (SELECT count(*) FROM runnable_heads) >= $1
     ORDER BY lap DESC, step DESC LIMIT 1)
    UNION ALL
    (SELECT integration, subject FROM walked
     WHERE (SELECT count(*) FROM runnable_heads) < $1
     ORDER BY lap DESC, step DESC LIMIT 1)
), ordered AS MATERIALIZED (
    SELECT q.receipt_id, q.integration, q.subject, q.attempts, q.payload_bytes,
           q.visible_at, q.lease_token, q.leased_by IS NOT NULL AS reclaimed
    FROM receipt_queue q
    WHERE q.receipt_id IN (SELECT receipt_id FROM runnable_heads)
      AND q.visible_at <= coalesce($8, now())
    ORDER BY q.integration, q.subject
    FOR UPDATE SKIP LOCKED
), locked AS MATERIALIZED (
    SELECT * FROM unordered UNION ALL SELECT * FROM ordered
), exhausted AS (
    DELETE FROM receipt_queue q USING locked l
    WHERE q.receipt_id = l.receipt_id AND l.attempts >= $6
    RETURNING q.receipt_id, q.attempts, q.last_error, q.integration, q.subject
), exhausted_held AS (
    -- An ordered one failed holds its subject (subject_leases says so).
    INSERT INTO subject_leases AS l (integration, subject, lease_token, leased_until)
    SELECT DISTINCT integration, subject, 0::int8, 'infinity'::timestamptz FROM exhausted
    WHERE subject IS NOT NULL
    ORDER BY integration, subject
    ON CONFLICT (integration, subject) DO UPDATE SET lease_token = 0, leased_until = 'infinity'
), failed AS (
    UPDATE receipts r
    SET status = 'failed', attempts = e.attempts, finished_at = coalesce($8, now()),
        last_error = format(
            'attempt %s of %s never recorded an outcome (its worker stopped or hung)%s',
            e.attempts, $6::int4, coalesce('; last error: ' || e.last_error, ''))
    FROM exhausted e WHERE r.id = e.receipt_id
    RETURNING r.id, r.integration, r.event_id, e.attempts
), sized AS (
    -- The count and byte budgets take receipts in claim order (oldest visible first,
    -- ordered heads among them); the rest stay unclaimed.
    SELECT receipt_id, integration, subject, lease_token, reclaimed,
           sum(payload_bytes) OVER claim_order AS running_bytes,
           row_number() OVER claim_order AS position
    FROM locked WHERE attempts < $6
    WINDOW claim_order AS (ORDER BY visible_at, receipt_id)
), tokened AS MATERIALIZED (
    -- From the sequence, and past the row's own token in any case (a worker of the
    -- previous version, mid-upgrade, still counts up per row).
    SELECT receipt_id, integration, subject, reclaimed,
           GREATEST(nextval('receipt_lease_tokens'), lease_token + 1) AS token
    FROM sized
    WHERE position <= $1 AND (running_bytes <= $5 OR (position = 1 AND $7))
), subjects_leased AS (
    -- INSERT … ON CONFLICT reads the latest row whatever this statement's snapshot: a
    -- subject another claim leased a moment ago, one whose head is being applied (its
    -- business transaction ended the lease and has not committed: this waits for it), or
    -- one held since, is not taken.
    INSERT INTO subject_leases AS l (integration, subject, lease_token, leased_until)
    SELECT t.integration, t.subject, t.token,
           coalesce($8, now()) + $2::int8 * interval '1 millisecond'
    FROM tokened t WHERE t.subject IS NOT NULL
    ORDER BY t.integration, t.subject
    ON CONFLICT (integration, subject) DO UPDATE
    SET lease_token = excluded.lease_token, leased_until = excluded.leased_until
    WHERE l.leased_until <= coalesce($8, now())
    RETURNING l.lease_token
), claimed AS (
    UPDATE receipt_queue q
    SET visible_at = coalesce($8, now()) + $2::int8 * interval '1 millisecond',
        attempts = q.attempts + 1,
        lease_token = t.token,
        leased_by = $3,
        leased_at = coalesce($8, now())
    FROM tokened t
    WHERE q.receipt_id = t.receipt_id
      AND (t.subject IS NULL OR t.token IN (SELECT lease_token FROM subjects_leased))
    RETURNING q.receipt_id, q.lease_token, q.attempts, t.reclaimed, q.payload_bytes,
              q.subject
)
SELECT 'claimed' AS "kind!", c.receipt_id AS "receipt_id!: ReceiptId",
       c.lease_token AS "lease_token!: LeaseToken", c.attempts AS "attempts!",
       c.reclaimed AS "reclaimed!", r.integration AS "integration!",
       r.source_scope AS "source_scope!", r.event_id AS "event_id!",
       r.event_type AS "event_type!", r.route_key AS "route_key!",
       r.delivery AS "delivery?: serde_json::Value",
       c.payload_bytes AS "payload_bytes!", r.received_at AS "received_at!",
       c.subject AS "ordered_subject?", r.subject AS "subject?", r.event_at AS "event_at?"
FROM claimed c JOIN receipts r ON r.id = c.receipt_id
UNION ALL
SELECT 'exhausted', f.id, 0, f.attempts, false, f.integration, '', f.event_id, '', '',
       NULL::jsonb, 0, coalesce($8, now()), NULL::text, NULL::text, NULL::timestamptz
FROM failed f
UNION ALL
-- One row: the subject the walk reached (integration, ordered_subject), if it walked.
SELECT 'walked_to', 0, 0, 0, false, w.integration, '', '', '', '', NULL::jsonb, 0,
       coalesce($8, now()), w.subject, NULL::text, NULL::timestamptz
FROM walked_to w
ORDER BY 2 -- receipt_id: claim order, exhausted ones among them (the walk's row first)
