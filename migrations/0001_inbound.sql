-- inbound's own objects, in the schema the migrating session's search_path names
-- (`inbound` unless configured). The baseline: no release had shipped when the history
-- before it was folded in, so it creates everything as it is. Later migrations must
-- never block writers beyond the migrator's lock timeout (store/migrations.rs; squawk
-- checks them in `make lint`, and tests/tests/migrations.rs applies each under writers).

-- Receipts: one row per accepted event, keyed by (source_scope, event_id), kept for history.
CREATE TABLE receipts (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration    text        NOT NULL,
    -- The receipt key's parts are identifiers, compared byte by byte: an integration's
    -- scopes (`{integration}/…`) are then one contiguous range of the key's index.
    source_scope   text        COLLATE "C" NOT NULL,
    event_id       text        COLLATE "C" NOT NULL,
    event_type     text        NOT NULL,
    -- The route key that matched at acceptance (GitHub: "event.action" or "event").
    route_key      text        NOT NULL,
    -- The validated payload; NULL once purged by retention.
    payload        jsonb,
    -- The provider's facts about the delivery that handlers and sinks may need (Shopify's
    -- triggered-at, webhook id and API version, GitHub's hook id, Stripe's api_version):
    -- a JSON object, or NULL when the provider sends none.
    delivery       jsonb,
    status         text        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'done', 'quarantined', 'failed')),
    outcome        text        CHECK (outcome IN ('applied', 'duplicate', 'ignored', 'closed')),
    outcome_reason text,
    attempts       integer     NOT NULL DEFAULT 0,
    last_error     text,
    received_at    timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    -- Opt-in content dedupe (GitHub signs no timestamp and no delivery id): the SHA-256
    -- of the raw body, unique within an integration while the receipt is kept.
    content_digest bytea,
    -- Where it came from: 'webhook' (a delivery that verified: signed by the provider) or
    -- 'api' (fetched over the provider's API with the account's key, by `inboundctl
    -- stripe backfill`).
    provenance     text        NOT NULL DEFAULT 'webhook'
                   CHECK (provenance IN ('webhook', 'api')),
    CONSTRAINT receipts_receipt_key UNIQUE (source_scope, event_id),
    CONSTRAINT receipts_outcome_only_when_done CHECK ((status = 'done') = (outcome IS NOT NULL))
);

CREATE INDEX receipts_status_received ON receipts (status, received_at)
    WHERE status <> 'done';
-- The receipt states other than done, for gauges and `inboundctl status`.
CREATE INDEX receipts_finished ON receipts (finished_at) WHERE status = 'done';
-- Payload purge walks only done receipts that still hold a payload.
CREATE INDEX receipts_payload_held ON receipts (finished_at)
    WHERE status = 'done' AND payload IS NOT NULL;
-- The content key of integrations with `content_dedupe`: one receipt per body digest.
CREATE UNIQUE INDEX receipts_content_key
    ON receipts (integration, content_digest) WHERE content_digest IS NOT NULL;
-- "What did the provider send for evt_…?": one descent whatever the number of scopes,
-- which senders create (Shopify's unsigned shop header, Connect accounts, installations).
CREATE INDEX receipts_by_event_id ON receipts (event_id);

-- The narrow hot table of unfinished work; a row leaves it when the receipt reaches a
-- terminal state, so claims scan only what is still to do. No foreign key to receipts:
-- its trigger (a lookup and a row lock of the receipt, written to the WAL) cost ~14 % of
-- the ingress's insert throughput (BENCHMARKS.md). The statements keep what it guarded:
-- a queue row is only inserted in the statement that inserts or requeues its receipt,
-- and only receipts that are done (which never have one) are deleted (purge checks it);
-- the soak's audit counts a queue row without its pending receipt as stuck.
CREATE TABLE receipt_queue (
    receipt_id    bigint      PRIMARY KEY,
    integration   text        NOT NULL,
    -- Claimable when visible_at <= now(); a lease is simply visibility in the future.
    visible_at    timestamptz NOT NULL DEFAULT now(),
    attempts      integer     NOT NULL DEFAULT 0,
    -- Fencing token from receipt_lease_tokens; completion must present the current one.
    lease_token   bigint      NOT NULL DEFAULT 0,
    leased_by     text,
    last_error    text,
    enqueued_at   timestamptz NOT NULL,
    leased_at     timestamptz,
    -- Claims are bounded by payload bytes as well as by count, without reading payloads.
    payload_bytes integer     NOT NULL DEFAULT 0
);

CREATE INDEX receipt_queue_claimable ON receipt_queue (visible_at, receipt_id);
CREATE INDEX receipt_queue_integration_age ON receipt_queue (integration, enqueued_at);

-- Fencing tokens come from one sequence, so a receipt's token only ever grows, across
-- replays too: a worker stalled with a token from an earlier life can never match.
CREATE SEQUENCE receipt_lease_tokens AS bigint START WITH 2147483648;

-- The audit trail: who decided what (receipt_replays, receipt_resolutions,
-- effect_resolutions) and who read which payload (payload_reads). Insert-only for every
-- role in fact, not by convention (store/roles.rs grants; the role tests show each
-- refusal): no role may update or delete a row; no foreign key cascades into these
-- tables from one a role may delete (they outlive what they explain); rows are written by
-- the decision functions below (and reads by a column-limited insert), so the time is the
-- server's clock when the row is written (`clock_timestamp()`, not the transaction's start,
-- which a session could hold open) and the database role that wrote the row
-- (`session_user`) stands beside the name the person gave.

-- Who sent a failed or quarantined receipt back to pending, and why.
CREATE TABLE receipt_replays (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id      bigint      NOT NULL,
    previous_status text        NOT NULL,
    replayed_by     text        NOT NULL,
    reason          text        NOT NULL,
    replayed_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    database_role   text        NOT NULL DEFAULT session_user
);
CREATE INDEX receipt_replays_by_receipt ON receipt_replays (receipt_id);

-- Operators' decisions about receipts (`inboundctl receipts quarantine|fail|close`):
-- `close` ends a failed or quarantined receipt done/closed, its key kept.
CREATE TABLE receipt_resolutions (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id      bigint      NOT NULL,
    previous_status text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('quarantine', 'fail', 'close')),
    resolved_by     text        NOT NULL,
    reason          text        NOT NULL,
    resolved_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    database_role   text        NOT NULL DEFAULT session_user
);
CREATE INDEX receipt_resolutions_by_receipt ON receipt_resolutions (receipt_id);

-- Who read which receipt's payload, where and when: one row per receipt whose payload a
-- console page or `inboundctl receipts show` showed, written before it is shown.
CREATE TABLE payload_reads (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id    bigint      NOT NULL,
    read_by       text        NOT NULL,
    -- 'console' (a page) or 'cli' (`inboundctl receipts show`).
    surface       text        NOT NULL CHECK (surface IN ('console', 'cli')),
    read_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    database_role text        NOT NULL DEFAULT session_user
);
CREATE INDEX payload_reads_by_receipt ON payload_reads (receipt_id, read_at);
CREATE INDEX payload_reads_by_time ON payload_reads (read_at);

-- The outbox: an intent is committed with its transition; operation_key is the
-- Idempotency-Key sent to the sink, derived from the business key.
CREATE TABLE effects (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id       bigint      NOT NULL REFERENCES receipts (id) ON DELETE CASCADE,
    operation_key    text        NOT NULL UNIQUE,
    sink             text        NOT NULL,
    kind             text        NOT NULL,
    tenant           text        NOT NULL,
    data             jsonb       NOT NULL,
    event            jsonb       NOT NULL,
    -- `abandoned`: an operator closed it unsent; `failed`: the sink refused it.
    status           text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    visible_at       timestamptz NOT NULL DEFAULT now(),
    lease_token      bigint      NOT NULL DEFAULT 0,
    first_attempt_at timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    leased_by        text,
    -- True once any attempt may have reached the sink: from then on only an idempotent
    -- sink within its retention, or a person, may cause another send.
    maybe_delivered  boolean     NOT NULL DEFAULT false,
    last_status_code integer,
    -- Reconciliations back off on their own count; uncertain_since starts their horizon.
    reconciliations  integer     NOT NULL DEFAULT 0,
    uncertain_since  timestamptz,
    CONSTRAINT effects_status_check CHECK (status IN
        ('pending', 'in_flight', 'completed', 'failed', 'uncertain', 'review', 'abandoned'))
);

CREATE INDEX effects_by_receipt ON effects (receipt_id);
CREATE INDEX effects_open_by_sink ON effects (sink, created_at)
    WHERE status IN ('pending', 'in_flight', 'uncertain');
CREATE INDEX effects_status ON effects (status);
-- The dispatcher claims per sink: due effects of one sink in due order.
CREATE INDEX effects_due_by_sink ON effects (sink, visible_at, id)
    WHERE status IN ('pending', 'in_flight', 'uncertain');

CREATE TABLE effect_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effect_id   bigint      NOT NULL REFERENCES effects (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL,
    -- 'delivery' (a POST) or 'reconcile' (a GET of status_url)
    kind        text        NOT NULL CHECK (kind IN ('delivery', 'reconcile')),
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    outcome     text,
    status_code integer,
    error       text
);
CREATE INDEX effect_attempts_by_effect ON effect_attempts (effect_id, id);

-- Operators' decisions about effects. No foreign key: a decision outlives the effect
-- that purge removes with its receipt (a cascade would erase who resolved it).
CREATE TABLE effect_resolutions (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effect_id       bigint      NOT NULL,
    previous_status text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('completed', 'retry', 'abandon')),
    resolved_by     text        NOT NULL,
    note            text        NOT NULL,
    resolved_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    database_role   text        NOT NULL DEFAULT session_user
);
CREATE INDEX effect_resolutions_by_effect ON effect_resolutions (effect_id, id);

-- What operators change, they change only through the functions below: the operator
-- role writes no receipt, queue row or effect itself (store/roles.rs), so every change it
-- makes is one of these, checked against the state machine here and audited in the same
-- statement. SECURITY DEFINER: they run as the migrating role that owns the tables; their
-- bodies are SQL-standard (BEGIN ATOMIC), so every name in them was resolved here and no
-- caller's search_path or temporary table can stand in for one. EXECUTE is revoked from
-- PUBLIC at the end and granted to the operator role alone.
--
-- Retention is the only way a receipt or its payload leaves. The rule: done, every effect
-- closed (completed or abandoned), no queue row, and both accepted and finished more than
-- `older_than_days` days ago by the server's clock — at least one day, at most 100 years
-- (a done receipt comes only from a worker or an audited close, and no role moves
-- received_at). Oldest first, at most `batch_size` rows, FOR UPDATE SKIP LOCKED (purge runs
-- beside the workers); each returns how many it removed.
CREATE FUNCTION purge_receipt_payloads(older_than_days integer, batch_size integer)
    RETURNS bigint LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH old AS MATERIALIZED (
        SELECT r.id FROM receipts r
        WHERE r.status = 'done' AND r.payload IS NOT NULL
          AND r.finished_at < now() - make_interval(days => least(greatest(older_than_days, 1), 36500))
          AND r.received_at < now() - make_interval(days => least(greatest(older_than_days, 1), 36500))
          -- The person deciding about an open effect reads the event behind it.
          AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                          AND e.status NOT IN ('completed', 'abandoned'))
        ORDER BY r.finished_at LIMIT batch_size
        FOR UPDATE OF r SKIP LOCKED
    ), purged AS (
        UPDATE receipts r SET payload = NULL FROM old WHERE r.id = old.id RETURNING 1
    )
    SELECT count(*) FROM purged;
END;

CREATE FUNCTION purge_receipt_keys(older_than_days integer, batch_size integer)
    RETURNS bigint LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH old AS MATERIALIZED (
        SELECT r.id FROM receipts r
        WHERE r.status = 'done'
          AND r.finished_at < now() - make_interval(days => least(greatest(older_than_days, 1), 36500))
          AND r.received_at < now() - make_interval(days => least(greatest(older_than_days, 1), 36500))
          AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                          AND e.status NOT IN ('completed', 'abandoned'))
          -- A done receipt has no queue row; were one there, deleting the receipt
          -- would strand it (receipt_queue has no foreign key).
          AND NOT EXISTS (SELECT 1 FROM receipt_queue q WHERE q.receipt_id = r.id)
        ORDER BY r.finished_at LIMIT batch_size
        FOR UPDATE SKIP LOCKED
    ), purged AS (
        -- The cascade removes the receipts' closed effects and their attempts; the
        -- audit trail has no foreign key and stays.
        DELETE FROM receipts r USING old WHERE r.id = old.id RETURNING 1
    )
    SELECT count(*) FROM purged;
END;

-- Decisions about one receipt or effect. Each locks its row, changes it only from the
-- statuses the state machine allows, records the decision in the same statement, and
-- returns the status it left (NULL, or false: nothing changed, and the caller refuses the
-- whole decision, rolling back what it did for other rows).

-- The row lock a decision holds until it commits (a worker finishing the receipt waits,
-- and the decision sees what it changes): its status, NULL when there is no such receipt.
CREATE FUNCTION decision_lock_receipt(receipt bigint) RETURNS text
    LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    SELECT status FROM receipts WHERE id = receipt FOR UPDATE;
END;

-- A pending receipt waiting out a retry delay made due now (attempts kept), recorded as a
-- replay; false when it is not pending or a worker holds its lease.
CREATE FUNCTION decision_make_receipt_due(receipt bigint, person text, why text)
    RETURNS boolean LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH due AS (
        UPDATE receipt_queue q SET visible_at = now()
        WHERE q.receipt_id = receipt
          AND NOT (q.leased_by IS NOT NULL AND q.visible_at > now())
          AND EXISTS (SELECT 1 FROM receipts r WHERE r.id = receipt AND r.status = 'pending')
        RETURNING q.receipt_id
    ), logged AS (
        INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason)
        SELECT due.receipt_id, 'pending', person, why FROM due
        RETURNING 1
    )
    SELECT count(*) = 1 FROM logged;
END;

-- A failed or quarantined receipt queued again, claimable now with its attempts reset,
-- recorded as a replay: the status it left, NULL when it was in neither.
CREATE FUNCTION decision_requeue_receipt(receipt bigint, person text, why text)
    RETURNS text LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH held AS (
        -- Its stored size: rendering it could fail for the very payload that made the
        -- receipt fail.
        SELECT r.id, r.status, r.integration, coalesce(pg_column_size(r.payload), 0) AS size
        FROM receipts r WHERE r.id = receipt AND r.status IN ('failed', 'quarantined')
        FOR UPDATE
    ), logged AS (
        INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason)
        SELECT held.id, held.status, person, why FROM held
    ), queued AS (
        INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes)
        SELECT held.id, held.integration, now(), now(), held.size FROM held
    ), requeued AS (
        UPDATE receipts r
        SET status = 'pending', outcome = NULL, outcome_reason = NULL, attempts = 0,
            finished_at = NULL
        FROM held WHERE r.id = held.id
        RETURNING held.status
    )
    SELECT requeued.status FROM requeued;
END;

-- A pending receipt taken out of the queue as quarantined or failed (`resolution`), the
-- reason as its outcome reason or its error, recorded; false when it is not pending. The
-- queue row first, as a worker's transaction locks it (then the receipt).
CREATE FUNCTION decision_take_receipt_out(receipt bigint, resolution text, person text, why text)
    RETURNS boolean LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH dequeued AS (
        DELETE FROM receipt_queue q
        WHERE q.receipt_id = receipt AND resolution IN ('quarantine', 'fail')
          AND EXISTS (SELECT 1 FROM receipts r WHERE r.id = receipt AND r.status = 'pending')
        RETURNING q.receipt_id
    ), logged AS (
        INSERT INTO receipt_resolutions (receipt_id, previous_status, action, resolved_by, reason)
        SELECT dequeued.receipt_id, 'pending', resolution, person, why FROM dequeued
    ), taken AS (
        UPDATE receipts r
        SET status = CASE resolution WHEN 'quarantine' THEN 'quarantined' ELSE 'failed' END,
            outcome = NULL,
            outcome_reason = CASE resolution WHEN 'quarantine' THEN why END,
            last_error = CASE resolution WHEN 'fail' THEN why ELSE r.last_error END,
            finished_at = now()
        FROM dequeued WHERE r.id = dequeued.receipt_id
        RETURNING 1
    )
    SELECT count(*) = 1 FROM taken;
END;

-- A failed or quarantined receipt that will not be processed ended done/closed with the
-- reason, its key kept, recorded as a close: the status it left, NULL when it was in
-- neither.
CREATE FUNCTION decision_close_receipt(receipt bigint, person text, why text)
    RETURNS text LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH held AS (
        SELECT r.id, r.status FROM receipts r
        WHERE r.id = receipt AND r.status IN ('failed', 'quarantined')
        FOR UPDATE
    ), logged AS (
        INSERT INTO receipt_resolutions (receipt_id, previous_status, action, resolved_by, reason)
        SELECT held.id, held.status, 'close', person, why FROM held
    ), closed AS (
        UPDATE receipts r
        SET status = 'done', outcome = 'closed', outcome_reason = why, finished_at = now()
        FROM held WHERE r.id = held.id
        RETURNING held.status
    )
    SELECT closed.status FROM closed;
END;

-- The row lock of an effect's decision (a dispatcher's claim waits): its status, NULL
-- when there is no such effect.
CREATE FUNCTION decision_lock_effect(effect bigint) RETURNS text
    LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    SELECT status FROM effects WHERE id = effect FOR UPDATE;
END;

-- An operator's resolution of an effect (`completed` from uncertain, review or failed;
-- `retry` and `abandon` from those and pending; never in_flight, completed or abandoned),
-- recorded: the status it left, NULL when the state machine refuses it. A new lease token
-- fences out any holder (a reconciliation in progress), so its answer cannot overwrite
-- the decision. A retry of a pending effect only makes it due (its history stands); any
-- other retry starts afresh: the operator decided that sending again is right, so neither
-- an earlier "may have landed" nor the time budgets hold it back (attempts are kept).
CREATE FUNCTION decision_resolve_effect(effect bigint, resolution text, person text, why text)
    RETURNS text LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH held AS (
        SELECT e.id, e.status FROM effects e
        WHERE e.id = effect
          AND ((resolution = 'completed' AND e.status IN ('uncertain', 'review', 'failed'))
            OR (resolution IN ('retry', 'abandon')
                AND e.status IN ('pending', 'uncertain', 'review', 'failed')))
        FOR UPDATE
    ), logged AS (
        INSERT INTO effect_resolutions (effect_id, previous_status, action, resolved_by, note)
        SELECT held.id, held.status, resolution, person, why FROM held
    ), resolved AS (
        UPDATE effects e
        SET status = CASE resolution WHEN 'completed' THEN 'completed'
                                     WHEN 'retry' THEN 'pending' ELSE 'abandoned' END,
            visible_at = now(), leased_by = NULL, lease_token = e.lease_token + 1,
            last_error = CASE WHEN resolution = 'abandon' THEN 'abandoned: ' || why
                              ELSE e.last_error END,
            completed_at = CASE WHEN resolution = 'completed' THEN now() ELSE e.completed_at END,
            maybe_delivered = CASE WHEN resolution = 'retry' AND held.status <> 'pending'
                                   THEN false ELSE e.maybe_delivered END,
            first_attempt_at = CASE WHEN resolution = 'retry' AND held.status <> 'pending'
                                    THEN NULL ELSE e.first_attempt_at END,
            uncertain_since = CASE WHEN resolution = 'retry' AND held.status <> 'pending'
                                   THEN NULL ELSE e.uncertain_since END,
            reconciliations = CASE WHEN resolution = 'retry' AND held.status <> 'pending'
                                   THEN 0 ELSE e.reconciliations END
        FROM held WHERE e.id = held.id
        RETURNING held.status
    )
    SELECT resolved.status FROM resolved;
END;

-- Events fetched over a provider's API with the account's key (`inboundctl stripe
-- backfill`), stored as the ingress stores deliveries but marked `api` — the operator role
-- inserts no receipt itself, so it can never make one look like a verified delivery — with
-- ids in the given order (the order the worker claims them in). Returns the input position
-- and id of each new receipt; a key already held gets nothing. In the given order two
-- writers can deadlock on a receipt key: PostgreSQL then aborts one statement, which the
-- caller may rerun.
CREATE FUNCTION backfill_receipts(integrations text[], source_scopes text[], event_ids text[],
                                  event_types text[], route_keys text[], payloads text[],
                                  deliveries text[])
    RETURNS TABLE (out_position bigint, out_id bigint) LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH input AS (
        SELECT * FROM unnest(integrations, source_scopes, event_ids, event_types, route_keys,
                             payloads, deliveries)
            WITH ORDINALITY AS input (integration, source_scope, event_id, event_type,
                                      route_key, payload, delivery, position)
    ), inserted AS (
        INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                              payload, delivery, provenance)
        SELECT input.integration, input.source_scope, input.event_id, input.event_type,
               input.route_key, input.payload::jsonb, input.delivery::jsonb, 'api'
        FROM input ORDER BY input.position
        ON CONFLICT DO NOTHING
        RETURNING receipts.id, receipts.integration, receipts.source_scope,
                  receipts.event_id, receipts.received_at
    ), queued AS (
        INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at,
                                   payload_bytes)
        SELECT inserted.id, inserted.integration, inserted.received_at,
               inserted.received_at, octet_length(input.payload)
        FROM inserted JOIN input USING (source_scope, event_id)
    ), durable AS (
        SELECT set_config('synchronous_commit', 'on', true)
        WHERE current_setting('synchronous_commit') IN ('off', 'local')
    )
    SELECT input.position, inserted.id
    FROM inserted JOIN input USING (source_scope, event_id)
    LEFT JOIN durable ON true;
END;

-- Functions are executable by everyone unless revoked: only the operator role (granted
-- by store/roles.rs) may call these.
REVOKE EXECUTE ON FUNCTION purge_receipt_payloads(integer, integer), purge_receipt_keys(integer, integer),
    decision_lock_receipt(bigint), decision_make_receipt_due(bigint, text, text),
    decision_requeue_receipt(bigint, text, text), decision_take_receipt_out(bigint, text, text, text),
    decision_close_receipt(bigint, text, text), decision_lock_effect(bigint),
    decision_resolve_effect(bigint, text, text, text),
    backfill_receipts(text[], text[], text[], text[], text[], text[], text[]) FROM PUBLIC;
