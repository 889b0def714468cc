-- Claims due effects of the sinks named ($4..$7: id, free slots, in-flight lease, resend
-- horizon), at most $1 in all, oldest due first. A pending effect begins its delivery
-- attempt here (in_flight, attempts + 1, an open effect_attempts row) unless it is a
-- resend past its horizon; anything else (a lost in-flight attempt, an uncertain effect)
-- is only leased for $2 ms. Effects of sinks not named are never touched.
-- Uses: effects_due_by_sink (sink, visible_at, id) WHERE status is open, once per sink.
-- Locks: the claimed effect rows, FOR UPDATE SKIP LOCKED (MATERIALIZED with LIMIT).
WITH s AS (
    SELECT * FROM unnest($4::text[], $5::int8[], $6::int8[], $7::int8[])
        AS s(sink, slots, lease_ms, horizon_ms)
), due AS MATERIALIZED (
    -- MATERIALIZED: the rows locked are exactly those claimed, each sink's oldest
    -- due first through effects_due_by_sink, at most its free slots.
    SELECT id, status, lease_ms,
           status = 'pending' AND COALESCE(
               NOT maybe_delivered
               OR first_attempt_at + horizon_ms * interval '1 millisecond'
                  > coalesce($8, now()),
               false) AS begins
    FROM (
        SELECT d.*, s.lease_ms, s.horizon_ms
        FROM s CROSS JOIN LATERAL (
            SELECT id, status, visible_at, maybe_delivered, first_attempt_at FROM effects
            WHERE sink = s.sink AND status IN ('pending', 'in_flight', 'uncertain')
              AND visible_at <= coalesce($8, now())
            ORDER BY visible_at, id
            LIMIT s.slots
            FOR UPDATE SKIP LOCKED
        ) d
    ) candidates
    ORDER BY visible_at, id
    LIMIT $1
), claimed AS (
    UPDATE effects e
    SET lease_token = e.lease_token + 1, leased_by = $3,
        status = CASE WHEN due.begins THEN 'in_flight' ELSE e.status END,
        attempts = e.attempts + due.begins::int,
        first_attempt_at = CASE WHEN due.begins
                                THEN COALESCE(e.first_attempt_at, $8, now())
                                ELSE e.first_attempt_at END,
        -- A step that sends nothing (a reconciliation, a verdict) is leased at
        -- least as long as a request to its sink may take, so its answer is never
        -- fenced out by a second claim of the same effect.
        visible_at = coalesce($8, now()) + CASE WHEN due.begins THEN due.lease_ms
                                  ELSE GREATEST($2::int8, due.lease_ms) END
                             * interval '1 millisecond'
    FROM due
    WHERE e.id = due.id
    RETURNING e.id, e.receipt_id, e.operation_key, e.sink, e.kind, e.tenant, e.data,
              e.event, due.status, e.attempts, e.lease_token,
              COALESCE(EXTRACT(EPOCH FROM coalesce($8, now()) - e.first_attempt_at), 0)
                  ::float8 AS first_attempt_age_secs,
              e.maybe_delivered, e.reconciliations,
              COALESCE(EXTRACT(EPOCH FROM coalesce($8, now()) - e.uncertain_since), 0)
                  ::float8 AS uncertain_age_secs,
              due.begins AS delivery_begun
), logged AS (
    INSERT INTO effect_attempts (effect_id, attempt, kind)
    SELECT id, attempts, 'delivery' FROM claimed WHERE delivery_begun
)
SELECT id AS "id!: EffectId", receipt_id AS "receipt_id!: ReceiptId",
       operation_key AS "operation_key!", sink AS "sink!", kind AS "kind!",
       tenant AS "tenant!", data AS "data!", event AS "event!",
       status AS "status!: EffectStatus", attempts AS "attempts!",
       lease_token AS "lease_token!: LeaseToken",
       first_attempt_age_secs AS "first_attempt_age_secs!",
       maybe_delivered AS "maybe_delivered!", reconciliations AS "reconciliations!",
       uncertain_age_secs AS "uncertain_age_secs!", delivery_begun AS "delivery_begun!"
FROM claimed ORDER BY id
