-- inbound's own objects, in the schema the migrating session's search_path names
-- (`inbound` unless configured). The baseline: no release had shipped when the history
-- before it was folded in, so it creates everything as it is. Later migrations must
-- never block writers beyond the migrator's lock timeout (store/migrations.rs; squawk
-- checks them in `make lint`, and tests/tests/migrations.rs applies each under writers).

-- History is laid out by time, so that retention drops whole partitions (one short
-- statement whatever a day's volume, no bulk DELETE or UPDATE, no vacuum debt):
-- - An id names its day: `day * 10^10 + serial`, the day counted from 1970-01-01 (UTC)
--   when the receipt was accepted (`history_day`). An effect's id names its receipt's
--   day. A lookup by id is then one partition's, however many there are.
-- - Payloads (`receipt_payloads`, personal data) are partitioned by day: payload
--   retention drops days.
-- - Receipt rows, their effects and attempts, and receipt keys are partitioned by key
--   period (`KEY PERIOD`, 90 days: Paddle replays notifications for 90 days, the longest
--   redelivery horizon of any provider inbound verifies; Stripe's is 30, GitHub's 3):
--   key retention drops whole periods, never the current or previous one.
-- - Each partitioned table has a default partition: a row whose partition is missing
--   lands there (never an error), `inbound_history_unpartitioned_rows` counts it and an
--   alert fires; creating the partition moves it (ensure_history_partitions). Rows kept
--   past their partition's drop (a receipt not done, an effect not closed) live there too.
-- Partitions are created ahead by the worker (ensure_history_partitions, hourly) and by
-- `inboundctl migrate`; pg_partman is not needed.

-- The day an instant falls on, counted from 1970-01-01 UTC: the high digits of an id.
CREATE FUNCTION history_day(at timestamptz) RETURNS integer
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN floor(extract(epoch FROM at) / 86400)::integer;

-- The first day of the key period an instant falls in (periods of 90 days from
-- 1970-01-01): a receipt key is held in its period's partition.
CREATE FUNCTION key_period(at timestamptz) RETURNS date
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN date '1970-01-01' + (history_day(at) - history_day(at) % 90);

-- The low digits of receipt and effect ids: at most 10^10 a day, ~115,000 a second
-- sustained (a day's ids beyond that collide with the day's first and the insert fails;
-- it is never silent).
CREATE SEQUENCE receipt_serials AS bigint MINVALUE 1 MAXVALUE 9999999999 CYCLE;
CREATE SEQUENCE effect_serials AS bigint MINVALUE 1 MAXVALUE 9999999999 CYCLE;

-- Receipts: one row per accepted event, kept for history (its key period's partition);
-- the receipt key (source_scope, event_id) is unique through receipt_keys.
CREATE TABLE receipts (
    -- The day it was accepted, then a serial (history_day): no role supplies its own.
    id             bigint      NOT NULL
                   DEFAULT history_day(now())::bigint * 10000000000 + nextval('receipt_serials'),
    integration    text        NOT NULL,
    -- The receipt key's parts are identifiers, compared byte by byte: an integration's
    -- scopes (`{integration}/…`) are then one contiguous range of the key's index.
    source_scope   text        COLLATE "C" NOT NULL,
    event_id       text        COLLATE "C" NOT NULL,
    event_type     text        NOT NULL,
    -- The route key that matched at acceptance (GitHub: "event.action" or "event").
    route_key      text        NOT NULL,
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
    -- of the raw body, unique within an integration through receipt_keys.
    content_digest bytea,
    -- Where it came from: 'webhook' (a delivery that verified: signed by the provider) or
    -- 'api' (fetched over the provider's API with the account's key, by `inboundctl
    -- stripe backfill`).
    provenance     text        NOT NULL DEFAULT 'webhook'
                   CHECK (provenance IN ('webhook', 'api')),
    CONSTRAINT receipts_pkey PRIMARY KEY (id),
    CONSTRAINT receipts_outcome_only_when_done CHECK ((status = 'done') = (outcome IS NOT NULL))
) PARTITION BY RANGE (id);
CREATE TABLE receipts_default PARTITION OF receipts DEFAULT;

-- The receipt states other than done, for gauges and `inboundctl status`.
CREATE INDEX receipts_status_received ON receipts (status, received_at)
    WHERE status <> 'done';
-- Retention finds the receipts of a day or period that are not done without reading
-- the done ones.
CREATE INDEX receipts_unfinished ON receipts (id) WHERE status <> 'done';
-- "What did the provider send for evt_…?": one descent per period whatever the number
-- of scopes, which senders create (Shopify's unsigned shop header, Connect accounts,
-- installations).
CREATE INDEX receipts_by_event_id ON receipts (event_id);

-- Payloads, apart from the receipt rows so that personal data leaves by day while the
-- receipt's history stays: the validated JSON, one row per receipt, in its day's
-- partition. No row: retention removed it.
CREATE TABLE receipt_payloads (
    receipt_id bigint NOT NULL,
    payload    jsonb  NOT NULL,
    CONSTRAINT receipt_payloads_pkey PRIMARY KEY (receipt_id)
) PARTITION BY RANGE (receipt_id);
CREATE TABLE receipt_payloads_default PARTITION OF receipt_payloads DEFAULT;

-- Receipt keys: what makes a receipt new. A key is held in the partition of the period
-- it was accepted in, and a key is new when neither that period nor the previous one
-- holds it: deduplication spans at least one whole period (90 days) and key retention
-- drops periods. On a period's first day a key is written into the previous period's
-- partition too, so two first deliveries on either side of the boundary meet in one
-- unique index (one waits for the other) instead of each missing the other's
-- uncommitted row; a statement that took longer than that day would be needed to slip
-- past it, and every statement inbound runs is bounded far below (the ingress's 2 s).
-- The content key (content_dedupe) is held beside it, unique within an integration.
CREATE TABLE receipt_keys (
    period         date  NOT NULL,
    source_scope   text  COLLATE "C" NOT NULL,
    event_id       text  COLLATE "C" NOT NULL,
    integration    text  NOT NULL,
    content_digest bytea,
    CONSTRAINT receipt_keys_pkey PRIMARY KEY (period, source_scope, event_id)
) PARTITION BY RANGE (period);
CREATE TABLE receipt_keys_default PARTITION OF receipt_keys DEFAULT;
CREATE UNIQUE INDEX receipt_keys_content
    ON receipt_keys (period, integration, content_digest) WHERE content_digest IS NOT NULL;

-- Claims the keys of new receipts at `at` (NULL: now()): writes each key into its period
-- (and, on a period's first day, into the previous one), skipping keys the previous
-- period holds; returns the keys that are new (every row written). Keys go in key order,
-- so two batches never deadlock on a receipt key. The ingress's insert and
-- backfill_receipts both call it.
CREATE FUNCTION claim_receipt_keys(integrations text[], source_scopes text[],
                                   event_ids text[], digests bytea[], at timestamptz)
    RETURNS TABLE (source_scope text, event_id text) LANGUAGE sql
BEGIN ATOMIC
    WITH clock AS (
        SELECT key_period(coalesce(at, now())) AS period,
               history_day(coalesce(at, now())) % 90 = 0 AS opening
    ), input AS (
        SELECT * FROM unnest(integrations, source_scopes, event_ids, digests)
            AS input (integration, source_scope, event_id, content_digest)
    ), written AS (
        INSERT INTO receipt_keys (period, source_scope, event_id, integration, content_digest)
        SELECT held.period, input.source_scope, input.event_id, input.integration,
               input.content_digest
        FROM input CROSS JOIN clock
        CROSS JOIN LATERAL (VALUES (clock.period), (clock.period - 90)) AS held (period)
        WHERE (held.period = clock.period OR clock.opening)
          AND (clock.opening OR NOT EXISTS (
                  SELECT 1 FROM receipt_keys earlier
                  WHERE earlier.period = clock.period - 90
                    AND earlier.source_scope = input.source_scope
                    AND earlier.event_id = input.event_id))
          AND (clock.opening OR input.content_digest IS NULL OR NOT EXISTS (
                  SELECT 1 FROM receipt_keys earlier
                  WHERE earlier.period = clock.period - 90
                    AND earlier.integration = input.integration
                    AND earlier.content_digest = input.content_digest))
        ORDER BY held.period, input.source_scope, input.event_id
        ON CONFLICT DO NOTHING
        RETURNING receipt_keys.source_scope, receipt_keys.event_id
    )
    SELECT written.source_scope, written.event_id FROM written CROSS JOIN clock
    GROUP BY written.source_scope, written.event_id, clock.opening
    HAVING count(*) = CASE WHEN clock.opening THEN 2 ELSE 1 END;
END;

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
-- Idempotency-Key sent to the sink, derived from the business key. An effect's id names
-- its receipt's day (effect_id_for), so effects sit in their receipt's key period and
-- leave with it. No foreign key to receipts: a partition is dropped whole, and a receipt
-- row is written only by the statements that also keep what a key would (the worker
-- records an intent for the receipt it holds). The operation key is unique across
-- partitions by insert_intent's rule (store/effects): a transaction-scoped advisory lock
-- on the key, then a look in every partition's operation-key index (a few periods).
CREATE TABLE effects (
    -- The worker gives effect_id_for(receipt); any other writer gets the day's.
    id               bigint      NOT NULL
                     DEFAULT history_day(now())::bigint * 10000000000 + nextval('effect_serials'),
    receipt_id       bigint      NOT NULL,
    operation_key    text        NOT NULL,
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
    CONSTRAINT effects_pkey PRIMARY KEY (id),
    CONSTRAINT effects_status_check CHECK (status IN
        ('pending', 'in_flight', 'completed', 'failed', 'uncertain', 'review', 'abandoned'))
) PARTITION BY RANGE (id);
CREATE TABLE effects_default PARTITION OF effects DEFAULT;

-- An effect's id for a receipt: the receipt's day, then a serial.
CREATE FUNCTION effect_id_for(receipt bigint) RETURNS bigint
    LANGUAGE sql VOLATILE
    RETURN receipt / 10000000000 * 10000000000 + nextval('effect_serials');

CREATE INDEX effects_by_receipt ON effects (receipt_id);
CREATE INDEX effects_by_operation_key ON effects (operation_key);
CREATE INDEX effects_open_by_sink ON effects (sink, created_at)
    WHERE status IN ('pending', 'in_flight', 'uncertain');
CREATE INDEX effects_status ON effects (status);
-- The dispatcher claims per sink: due effects of one sink in due order.
CREATE INDEX effects_due_by_sink ON effects (sink, visible_at, id)
    WHERE status IN ('pending', 'in_flight', 'uncertain');
-- Retention finds a period's effects that are not closed without reading the others.
CREATE INDEX effects_unclosed_by_receipt ON effects (receipt_id)
    WHERE status NOT IN ('completed', 'abandoned');

CREATE TABLE effect_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    effect_id   bigint      NOT NULL,
    attempt     integer     NOT NULL,
    -- 'delivery' (a POST) or 'reconcile' (a GET of status_url)
    kind        text        NOT NULL CHECK (kind IN ('delivery', 'reconcile')),
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    outcome     text,
    status_code integer,
    error       text,
    CONSTRAINT effect_attempts_pkey PRIMARY KEY (effect_id, id)
) PARTITION BY RANGE (effect_id);
CREATE TABLE effect_attempts_default PARTITION OF effect_attempts DEFAULT;

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
-- Retention is the only way a receipt or its payload leaves, and it leaves by partition:
-- payloads by day, receipt rows with their effects, attempts and keys by key period. A
-- partition goes once its whole range is older than the age asked for (at least a day,
-- at most 100 years, by the server's clock); the current and previous key periods never
-- go (deduplication reads them). What may not go yet is carried into the default
-- partition first, in the same transaction: the payload of a receipt that is not done or
-- has an effect not closed (the person deciding reads the event behind it), and such a
-- receipt's row with all its effects and their attempts. Each drop takes the parent's
-- ACCESS EXCLUSIVE lock for a moment, waiting at most lock_timeout (1 s) for it — the
-- ingress and workers pause that long at most, and a drop that cannot get it fails its
-- call and is left for the next run. Each call drops at most one partition, in its own
-- transaction, and returns what it dropped and what it carried.

-- The dated partitions of inbound's partitioned tables: the parent, the partition, the
-- first day of its range and the day after its last, and the planner's estimate of its
-- rows (no count: counting reads the partition). Named `{parent}_{yyyymmdd}` by
-- ensure_history_partitions, which alone creates them.
CREATE FUNCTION history_partitions()
    RETURNS TABLE (parent text, partition text, first_day date, end_day date,
                   estimated_rows bigint)
    LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT parent.relname::text, child.relname::text,
           to_date(right(child.relname, 8), 'YYYYMMDD'),
           to_date(right(child.relname, 8), 'YYYYMMDD')
               + CASE parent.relname WHEN 'receipt_payloads' THEN 1 ELSE 90 END,
           greatest(child.reltuples, 0)::bigint
    FROM pg_inherits i
    JOIN pg_class parent ON parent.oid = i.inhparent
    JOIN pg_class child ON child.oid = i.inhrelid
    WHERE parent.relname IN ('receipts', 'receipt_payloads', 'receipt_keys', 'effects',
                             'effect_attempts')
      AND parent.relnamespace = (SELECT c.relnamespace FROM pg_class c
                                 WHERE c.oid = 'receipts'::regclass)
      AND child.relname ~ '_[0-9]{8}$'
    ORDER BY 1, 3;
END;

-- Creates the partitions from yesterday to `days_ahead` days after `at` (at most 400):
-- each day's payload partition and each key period's partitions, the previous period's
-- too; returns how many it created. A partition is created standalone and then attached
-- (SHARE UPDATE EXCLUSIVE on the parent: writers never wait), after moving into it any
-- rows the default partition took while it was missing.
CREATE FUNCTION ensure_history_partitions(at timestamptz, days_ahead integer)
    RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    today   integer := history_day(at);
    last    integer := history_day(at) + least(greatest(days_ahead, 0), 400);
    period  integer;
    created integer := 0;
BEGIN
    -- One maker at a time (every worker calls this hourly); the others leave it to it.
    IF NOT pg_try_advisory_xact_lock(1768030210, 1) THEN
        RETURN 0;
    END IF;
    PERFORM set_config('lock_timeout', '1000', true);
    FOR day IN today - 1 .. last LOOP
        created := created + history_attach('receipt_payloads', 'receipt_id', day, day + 1);
    END LOOP;
    period := (today - today % 90) - 90;
    WHILE period <= last LOOP
        created := created + history_attach('receipts', 'id', period, period + 90);
        created := created + history_attach('effects', 'id', period, period + 90);
        created := created + history_attach('effect_attempts', 'effect_id', period, period + 90);
        created := created + history_attach('receipt_keys', 'period', period, period + 90);
        period := period + 90;
    END LOOP;
    RETURN created;
END
$$;

-- Creates and attaches `parent`'s partition for days [first_day, end_day) (day numbers),
-- unless it exists: 1 when it created one. Ranges are ids (`day * 10^10`) except
-- receipt_keys', which are dates.
CREATE FUNCTION history_attach(parent text, range_column text, first_day integer,
                               end_day integer)
    RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    partition text := parent || '_' || to_char(date '1970-01-01' + first_day, 'YYYYMMDD');
    low text;
    high text;
BEGIN
    IF to_regclass(format('%I', partition)) IS NOT NULL THEN
        RETURN 0;
    END IF;
    IF parent = 'receipt_keys' THEN
        low := quote_literal(date '1970-01-01' + first_day);
        high := quote_literal(date '1970-01-01' + end_day);
    ELSE
        low := (first_day::bigint * 10000000000)::text;
        high := (end_day::bigint * 10000000000)::text;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING CONSTRAINTS)', partition, parent);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %s AND %I < %s RETURNING *) '
                   'INSERT INTO %I SELECT * FROM moved',
                   parent || '_default', range_column, low, range_column, high, partition);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                   parent, partition, low, high);
    RETURN 1;
END
$$;

-- Removes from the default partition the carried payloads that may now go, then drops the
-- oldest payload partition of a day wholly older than `older_than_days`, carrying the
-- payloads retention keeps (above) into the default partition: that day with how many it
-- carried, or no row. One day per call (each call a transaction of its own): the caller
-- calls until no row comes back.
CREATE FUNCTION drop_payload_days_at(older_than_days integer, at timestamptz)
    RETURNS TABLE (day date, carried bigint) LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    cutoff date := date '1970-01-01' + history_day(at)
                   - least(greatest(older_than_days, 1), 36500);
    part record;
    low bigint;
    high bigint;
BEGIN
    PERFORM set_config('lock_timeout', '1000', true);
    -- Payloads carried earlier whose receipts are now done with every effect closed.
    DELETE FROM receipt_payloads_default d
    WHERE d.receipt_id < (cutoff - date '1970-01-01')::bigint * 10000000000
      AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.id = d.receipt_id AND r.status <> 'done')
      AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = d.receipt_id
                      AND e.status NOT IN ('completed', 'abandoned'));
    FOR part IN SELECT * FROM history_partitions() h
                WHERE h.parent = 'receipt_payloads' AND h.end_day <= cutoff LOOP
        low := (part.first_day - date '1970-01-01')::bigint * 10000000000;
        high := (part.end_day - date '1970-01-01')::bigint * 10000000000;
        CREATE TEMPORARY TABLE IF NOT EXISTS carried_payloads
            (receipt_id bigint, payload jsonb) ON COMMIT DROP;
        TRUNCATE pg_temp.carried_payloads;
        EXECUTE format('INSERT INTO pg_temp.carried_payloads SELECT p.* FROM %I p '
                       'WHERE p.receipt_id IN (SELECT held_receipts($1, $2))', part.partition)
            USING low, high;
        EXECUTE format('DROP TABLE %I', part.partition);
        INSERT INTO receipt_payloads SELECT * FROM pg_temp.carried_payloads;
        day := part.first_day;
        carried := (SELECT count(*) FROM pg_temp.carried_payloads);
        RETURN NEXT;
        -- One day per call, so that each drop is a transaction of its own.
        EXIT;
    END LOOP;
END
$$;

-- The receipts with ids in [low, high) that retention keeps: not done, with an effect
-- that is not closed (completed or abandoned), or queued — through the partial indexes
-- and the queue, which hold only the few.
CREATE FUNCTION held_receipts(low bigint, high bigint) RETURNS SETOF bigint
    LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT r.id FROM receipts r WHERE r.id >= low AND r.id < high AND r.status <> 'done'
    UNION
    SELECT e.receipt_id FROM effects e
    WHERE e.receipt_id >= low AND e.receipt_id < high
      AND e.status NOT IN ('completed', 'abandoned')
    UNION
    -- A done receipt never has a queue row; were one there, dropping the receipt would
    -- strand it (receipt_queue has no foreign key).
    SELECT q.receipt_id FROM receipt_queue q
    WHERE q.receipt_id >= low AND q.receipt_id < high;
END;

-- Removes from the default partitions the carried receipts that may now go (with their
-- effects and attempts), then drops the oldest key period wholly older than
-- `older_than_days` (never the current or the previous one): its receipts, effects,
-- attempts and keys, carrying the receipts retention keeps (with all their effects and
-- attempts) into the default partitions. That period with how many receipts it carried,
-- or no row; one period per call, as drop_payload_days_at.
CREATE FUNCTION drop_key_periods_at(older_than_days integer, at timestamptz)
    RETURNS TABLE (period date, carried bigint) LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    cutoff date := date '1970-01-01' + history_day(at)
                   - least(greatest(older_than_days, 1), 36500);
    probed date := key_period(at) - 90;
    part record;
    low bigint;
    high bigint;
BEGIN
    PERFORM set_config('lock_timeout', '1000', true);
    -- Receipts carried earlier that may now go, with their effects and attempts: the
    -- default partition's few, row by row.
    WITH going AS MATERIALIZED (
        SELECT r.id FROM receipts_default r
        WHERE r.id < least((cutoff - date '1970-01-01')::bigint,
                           (probed - date '1970-01-01')::bigint) * 10000000000
          AND r.id NOT IN (SELECT held_receipts(0, (probed - date '1970-01-01')::bigint * 10000000000))
        FOR UPDATE
    ), effects_going AS (
        DELETE FROM effects e USING going WHERE e.receipt_id = going.id RETURNING e.id
    ), attempts_going AS (
        DELETE FROM effect_attempts a USING effects_going WHERE a.effect_id = effects_going.id
    )
    DELETE FROM receipts_default r USING going WHERE r.id = going.id;
    FOR part IN SELECT * FROM history_partitions() h
                WHERE h.parent = 'receipts' AND h.end_day <= cutoff
                  AND h.first_day < probed LOOP
        low := (part.first_day - date '1970-01-01')::bigint * 10000000000;
        high := (part.end_day - date '1970-01-01')::bigint * 10000000000;
        CREATE TEMPORARY TABLE IF NOT EXISTS carried_receipts
            ON COMMIT DROP AS SELECT * FROM receipts WITH NO DATA;
        CREATE TEMPORARY TABLE IF NOT EXISTS carried_effects
            ON COMMIT DROP AS SELECT * FROM effects WITH NO DATA;
        CREATE TEMPORARY TABLE IF NOT EXISTS carried_attempts
            ON COMMIT DROP AS SELECT * FROM effect_attempts WITH NO DATA;
        TRUNCATE pg_temp.carried_receipts, pg_temp.carried_effects, pg_temp.carried_attempts;
        INSERT INTO pg_temp.carried_receipts
            SELECT r.* FROM receipts r WHERE r.id IN (SELECT held_receipts(low, high));
        INSERT INTO pg_temp.carried_effects
            SELECT e.* FROM effects e
            WHERE e.receipt_id IN (SELECT c.id FROM pg_temp.carried_receipts c);
        INSERT INTO pg_temp.carried_attempts
            SELECT a.* FROM effect_attempts a
            WHERE a.effect_id IN (SELECT c.id FROM pg_temp.carried_effects c);
        EXECUTE format('DROP TABLE %I, %I, %I, %I', part.partition,
                       'effects_' || right(part.partition, 8),
                       'effect_attempts_' || right(part.partition, 8),
                       'receipt_keys_' || right(part.partition, 8));
        INSERT INTO receipts SELECT * FROM pg_temp.carried_receipts;
        INSERT INTO effects SELECT * FROM pg_temp.carried_effects;
        INSERT INTO effect_attempts OVERRIDING SYSTEM VALUE SELECT * FROM pg_temp.carried_attempts;
        period := part.first_day;
        carried := (SELECT count(*) FROM pg_temp.carried_receipts);
        RETURN NEXT;
        -- One period per call, so that each drop is a transaction of its own.
        EXIT;
    END LOOP;
END
$$;

-- What an operator runs: retention by the server's clock. The `_at` forms, with a clock
-- of the caller's, are the owner's alone (tests move it); a role that could pass one
-- could drop today.
CREATE FUNCTION drop_payload_days(older_than_days integer)
    RETURNS TABLE (day date, carried bigint) LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    SELECT * FROM drop_payload_days_at(older_than_days, now());
END;

CREATE FUNCTION drop_key_periods(older_than_days integer)
    RETURNS TABLE (period date, carried bigint) LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    SELECT * FROM drop_key_periods_at(older_than_days, now());
END;

-- The plpgsql functions above name tables unqualified: fix their search_path to this
-- schema with pg_temp last, so that no caller's temporary table stands in for one.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION ensure_history_partitions(timestamptz, integer) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION history_attach(text, text, integer, integer) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION drop_payload_days_at(integer, timestamptz) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION drop_key_periods_at(integer, timestamptz) SET search_path = %I, pg_temp', current_schema());
END
$$;

-- The partitions of the days and periods around the migration: the processes keep
-- creating them ahead.
SELECT ensure_history_partitions(now(), 7);

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
        SELECT r.id, r.status, r.integration,
               coalesce((SELECT pg_column_size(p.payload) FROM receipt_payloads p
                         WHERE p.receipt_id = r.id), 0) AS size
        FROM receipts r WHERE r.id = receipt AND r.status IN ('failed', 'quarantined')
        FOR UPDATE OF r
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
-- and id of each new receipt; a key already held gets nothing. Keys are claimed in key
-- order (claim_receipt_keys), as the ingress claims them.
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
    ), new AS (
        SELECT * FROM claim_receipt_keys(integrations, source_scopes, event_ids,
                                         array_fill(NULL::bytea, ARRAY[cardinality(event_ids)]),
                                         NULL)
    ), inserted AS (
        INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                              delivery, provenance)
        SELECT input.integration, input.source_scope, input.event_id, input.event_type,
               input.route_key, input.delivery::jsonb, 'api'
        FROM input JOIN new USING (source_scope, event_id) ORDER BY input.position
        RETURNING receipts.id, receipts.integration, receipts.source_scope,
                  receipts.event_id, receipts.received_at
    ), stored AS (
        INSERT INTO receipt_payloads (receipt_id, payload)
        SELECT inserted.id, input.payload::jsonb
        FROM inserted JOIN input USING (source_scope, event_id)
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
REVOKE EXECUTE ON FUNCTION drop_payload_days(integer), drop_key_periods(integer),
    drop_payload_days_at(integer, timestamptz), drop_key_periods_at(integer, timestamptz),
    ensure_history_partitions(timestamptz, integer), history_attach(text, text, integer, integer),
    decision_lock_receipt(bigint), decision_make_receipt_due(bigint, text, text),
    decision_requeue_receipt(bigint, text, text), decision_take_receipt_out(bigint, text, text, text),
    decision_close_receipt(bigint, text, text), decision_lock_effect(bigint),
    decision_resolve_effect(bigint, text, text, text),
    backfill_receipts(text[], text[], text[], text[], text[], text[], text[]) FROM PUBLIC;
