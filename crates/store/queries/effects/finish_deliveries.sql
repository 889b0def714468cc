-- The recorder's statement: the ends of many delivery attempts at once, each fenced on
-- its lease token (an effect whose lease was taken over is left as it is), closing each
-- attempt's history row. Returns the ids recorded.
-- Uses: effects by primary key; effect_attempts_by_effect (effect_id, id).
-- Locks: the effect rows it updates and their open attempt rows.
WITH f AS (
    SELECT * FROM unnest($1::int8[], $2::int8[], $3::int4[], $4::text[], $5::int8[],
                         $6::text[], $7::bool[], $8::text[], $9::int4[])
        AS f(id, lease_token, attempt, status, delay_ms, error, maybe_delivered,
             outcome, status_code)
), updated AS (
    UPDATE effects e
    SET status = f.status,
        visible_at = coalesce($10, now()) + f.delay_ms * interval '1 millisecond',
        last_error = f.error, maybe_delivered = f.maybe_delivered,
        last_status_code = f.status_code, leased_by = NULL,
        uncertain_since = CASE WHEN f.status = 'uncertain'
                               THEN COALESCE(e.uncertain_since, $10, now())
                               ELSE e.uncertain_since END,
        completed_at = CASE WHEN f.status = 'completed' THEN coalesce($10, now()) END
    FROM f WHERE e.id = f.id AND e.lease_token = f.lease_token
    RETURNING e.id
), closed AS (
    UPDATE effect_attempts a
    SET finished_at = coalesce($10, now()), outcome = f.outcome,
        status_code = f.status_code, error = f.error
    FROM f JOIN updated u ON u.id = f.id
    WHERE a.effect_id = f.id AND a.attempt = f.attempt AND a.kind = 'delivery'
)
SELECT id AS "id!: EffectId" FROM updated
