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
    -- The business object the event is about (its route's subject pointers, else its
    -- provider's default: docs/contract.md, "Subjects"), NULL when it names none; and
    -- the provider's own time of the event, NULL when it sends none.
    subject        text        COLLATE "C",
    event_at       timestamptz,
    -- Accepted on an `ordered = true` route: its subject's receipts run one at a time,
    -- in event-time order, and a failed or quarantined one holds the rest.
    ordered        boolean     NOT NULL DEFAULT false,
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
-- A subject's timeline: its newest receipts by id, one descent per key period, sorted
-- by event time afterwards however many receipts the subject or the table holds.
CREATE INDEX receipts_by_subject ON receipts (integration, subject, id)
    WHERE subject IS NOT NULL;
-- The subjects an ordered receipt holds: failed or quarantined, until replayed or closed
-- (what the held-subject gauges, `inboundctl subject held` and a replay or close of the
-- last holding receipt read; a claim reads the hold from subject_leases).
CREATE INDEX receipts_holding_subject ON receipts (integration, subject)
    WHERE ordered AND status IN ('failed', 'quarantined');

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
    -- Compared byte by byte, as the subject is: a worker's walk over the ordered subjects
    -- resumes where its own comparison says it stopped.
    integration   text        COLLATE "C" NOT NULL,
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
    payload_bytes integer     NOT NULL DEFAULT 0,
    -- An ordered receipt's subject (NULL: unordered) and its place in the subject's
    -- order: the provider's event time, else the time it was accepted; then receipt_id.
    -- Only a subject's first row is claimed, under its subject_leases row.
    subject       text        COLLATE "C",
    ordered_at    timestamptz
);

-- Unordered receipts are claimed by visibility; ordered ones by subject, head first.
CREATE INDEX receipt_queue_claimable ON receipt_queue (visible_at, receipt_id)
    WHERE subject IS NULL;
CREATE INDEX receipt_queue_subject_order ON receipt_queue (integration, subject, ordered_at, receipt_id)
    WHERE subject IS NOT NULL;
CREATE INDEX receipt_queue_integration_age ON receipt_queue (integration, enqueued_at);

-- Fencing tokens come from one sequence, so a receipt's token only ever grows, across
-- replays too: a worker stalled with a token from an earlier life can never match.
CREATE SEQUENCE receipt_lease_tokens AS bigint START WITH 2147483648;

-- Which ordered subjects a worker is applying now: a row is the subject's mutex, taken by
-- the claim that leases the subject's head (INSERT … ON CONFLICT sees the latest row,
-- whatever the claim's snapshot), with that receipt's lease token and lease. The head's
-- business transaction ends it with the head's queue row, and only while it still
-- carries the head's token (both commit or neither); a retry's release deletes it; a dead
-- worker's expires with its lease. So two receipts of one subject never run at once, even
-- when a late one sorts before a running head or a worker outlives its lease. A held
-- subject's row never expires (token 0): every path that fails or quarantines an ordered
-- receipt writes it (the worker's finish and retry bookkeeping, the claim's exhausted
-- ones, an operator's take-out), so a claim reads the hold here, at its latest when it
-- waited for that transaction; the last holding receipt's replay or close deletes it
-- (release_subject_hold; and the gauges' sweep one no receipt holds: a safeguard). A lease
-- is given back by ending it now, in place.
-- A lease is given back by ending it in place ('-infinity'): an update that touches no
-- index (room is left on each page for it), and the row serves the subject's next lease;
-- the gauges' sweep deletes rows ended over an hour ago.
CREATE TABLE subject_leases (
    integration  text        COLLATE "C" NOT NULL,
    subject      text        COLLATE "C" NOT NULL,
    lease_token  bigint      NOT NULL,
    leased_until timestamptz NOT NULL,
    PRIMARY KEY (integration, subject)
) WITH (fillfactor = 50);

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
    -- effect_id_for(receipt_id): its receipt's day, then a serial.
    id               bigint      NOT NULL,
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
    -- An effect sits in its receipt's key period and leaves with it.
    CONSTRAINT effects_id_names_its_receipts_day
        CHECK (id / 10000000000 = receipt_id / 10000000000),
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
-- partition in the same transaction: the payload of a receipt that is not done, queued,
-- or has an effect not closed (the person deciding reads the event behind it), and such
-- a receipt's row with all its effects and their attempts — at most 10,000 receipts a
-- partition, or the drop is refused with the reason (they are a backlog for a person,
-- not history). A drop takes its tables' ACCESS EXCLUSIVE locks before it reads what to
-- carry (so no commit lands between the read and the drop), in the writers' order, each
-- waited for at most lock_timeout (250 ms; the ingress and workers pause while it waits
-- and while it carries, BENCHMARKS.md "history"), and a drop that cannot get its locks
-- fails its call and is left for the next run. Each call detaches at most one partition
-- (a day, or a key period's four), in its own transaction, and returns what it dropped
-- and what it carried; drop_detached_history then removes the detached tables' files
-- without any lock a writer needs. Carried rows are kept in the function's own
-- variables, never in a table a caller could have made.

-- The dated partitions of inbound's partitioned tables: the parent, the partition, the
-- first day of its range and the day after its last, and the planner's estimate of its
-- rows (no count: counting reads the partition). Named `{parent}_{yyyymmdd}` of their
-- first day by ensure_history_partitions, which alone creates them; a payload partition
-- holds one day, any other runs to the end of its key period (one made after its period
-- began starts later: see history_attach).
CREATE FUNCTION history_partitions()
    RETURNS TABLE (parent text, partition text, first_day date, end_day date,
                   estimated_rows bigint)
    LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT parent.relname::text, child.relname::text, named.day,
           CASE parent.relname WHEN 'receipt_payloads' THEN named.day + 1
                ELSE named.day - (named.day - date '1970-01-01') % 90 + 90 END,
           greatest(child.reltuples, 0)::bigint
    FROM pg_inherits i
    JOIN pg_class parent ON parent.oid = i.inhparent
    JOIN pg_class child ON child.oid = i.inhrelid
    CROSS JOIN LATERAL (SELECT to_date(right(child.relname, 8), 'YYYYMMDD') AS day) named
    WHERE parent.relname IN ('receipts', 'receipt_payloads', 'receipt_keys', 'effects',
                             'effect_attempts')
      AND parent.relnamespace = (SELECT c.relnamespace FROM pg_class c
                                 WHERE c.oid = 'receipts'::regclass)
      AND child.relname ~ '_[0-9]{8}$'
    ORDER BY 1, 3;
END;

-- Creates the partitions from yesterday to `days_ahead` days after `at` (at most 400):
-- each day's payload partition and each key period's partitions, the previous period's
-- too; returns how many it created. One maker at a time: another caller returns 0.
CREATE FUNCTION ensure_history_partitions(at timestamptz, days_ahead integer)
    RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    today   integer := history_day(at);
    last    integer := history_day(at) + least(greatest(days_ahead, 0), 400);
    period  integer;
    created integer := 0;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1768030210, 1) THEN
        RETURN 0;
    END IF;
    PERFORM set_config('lock_timeout', '250', true);
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

-- Creates and attaches `parent`'s partition for days [first_day, end_day) (day numbers)
-- unless one covers any of them: 1 when it created one. Ranges are ids (`day * 10^10`)
-- except receipt_keys', which are dates. Rows are never moved under a lock: when the
-- default partition holds rows of the range (its partition was missing while they were
-- written), the partition starts after the newest of them — the next day — and those
-- rows stay where they are (retention removes them by row, once they may go); a range
-- of receipt keys cannot start later (it is one period), so that period's keys stay in
-- the default partition. Attaching takes SHARE UPDATE EXCLUSIVE on the parent (no
-- writer waits) and briefly ACCESS EXCLUSIVE on the default partition, to check it.
CREATE FUNCTION history_attach(parent text, range_column text, first_day integer,
                               end_day integer)
    RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    start integer := first_day;
    newest bigint;
    name text;
    low text;
    high text;
BEGIN
    IF EXISTS (SELECT 1 FROM history_partitions() h
               WHERE h.parent = history_attach.parent
                 AND h.first_day < date '1970-01-01' + history_attach.end_day
                 AND h.end_day > date '1970-01-01' + history_attach.first_day) THEN
        RETURN 0;
    END IF;
    IF parent = 'receipt_keys' THEN
        IF EXISTS (SELECT 1 FROM receipt_keys_default k
                   WHERE k.period = date '1970-01-01' + history_attach.first_day) THEN
            RETURN 0;
        END IF;
        low := quote_literal(date '1970-01-01' + first_day);
        high := quote_literal(date '1970-01-01' + end_day);
    ELSE
        EXECUTE format('SELECT max(%I) FROM %I WHERE %I >= $1 AND %I < $2', range_column,
                       parent || '_default', range_column, range_column)
            INTO newest USING first_day::bigint * 10000000000, end_day::bigint * 10000000000;
        IF newest IS NOT NULL THEN
            start := (newest / 10000000000)::integer + 1;
            IF start >= end_day THEN
                RETURN 0;
            END IF;
        END IF;
        low := (start::bigint * 10000000000)::text;
        high := (end_day::bigint * 10000000000)::text;
    END IF;
    name := parent || '_' || to_char(date '1970-01-01' + start, 'YYYYMMDD');
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING CONSTRAINTS)', name, parent);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                   parent, name, low, high);
    RETURN 1;
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

-- Retention's first step on each call: what the default partitions hold that may go
-- now, at most 10,000 rows of each a call — payloads of receipts that may leave and are
-- older than `payload_cutoff`; receipts (with their effects and attempts) older than
-- `receipt_cutoff` that are no longer held; receipt keys of periods before
-- `receipt_cutoff`'s that deduplication no longer reads. These are the rows retention
-- carried, and those written while a partition was missing: few, so row by row.
CREATE FUNCTION release_default_rows(payload_cutoff bigint, receipt_cutoff bigint)
    RETURNS void LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH payloads_going AS (
        SELECT d.receipt_id FROM receipt_payloads_default d
        WHERE d.receipt_id < payload_cutoff
          AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.id = d.receipt_id AND r.status <> 'done')
          AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = d.receipt_id
                          AND e.status NOT IN ('completed', 'abandoned'))
          AND NOT EXISTS (SELECT 1 FROM receipt_queue q WHERE q.receipt_id = d.receipt_id)
        LIMIT 10000
    ), payloads_gone AS (
        DELETE FROM receipt_payloads_default d USING payloads_going g
        WHERE d.receipt_id = g.receipt_id
    ), receipts_going AS MATERIALIZED (
        SELECT r.id FROM receipts_default r
        WHERE r.id < receipt_cutoff AND r.status = 'done'
          AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.receipt_id = r.id
                          AND e.status NOT IN ('completed', 'abandoned'))
          AND NOT EXISTS (SELECT 1 FROM receipt_queue q WHERE q.receipt_id = r.id)
        LIMIT 10000
        FOR UPDATE OF r
    ), effects_gone AS (
        DELETE FROM effects e USING receipts_going g WHERE e.receipt_id = g.id RETURNING e.id
    ), attempts_gone AS (
        DELETE FROM effect_attempts a USING effects_gone g WHERE a.effect_id = g.id
    ), receipts_gone AS (
        DELETE FROM receipts_default r USING receipts_going g WHERE r.id = g.id
    ), keys_going AS (
        SELECT k.period, k.source_scope, k.event_id FROM receipt_keys_default k
        WHERE k.period < date '1970-01-01' + (receipt_cutoff / 10000000000)::integer - 90
        LIMIT 10000
    )
    DELETE FROM receipt_keys_default k USING keys_going g
    WHERE (k.period, k.source_scope, k.event_id) = (g.period, g.source_scope, g.event_id);
END;

-- Removes what the default partitions hold that may go (release_default_rows), then
-- drops the oldest payload partition whose day is wholly older than `older_than_days`,
-- carrying the payloads retention keeps into the default partition: that day with how
-- many it carried, or no row. One day per call (each call a transaction of its own):
-- the caller calls until no row comes back.
CREATE FUNCTION drop_payload_days_at(older_than_days integer, at timestamptz)
    RETURNS TABLE (day date, carried bigint) LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    cutoff date := date '1970-01-01' + history_day(at)
                   - least(greatest(older_than_days, 1), 36500);
    part record;
    kept receipt_payloads[];
BEGIN
    PERFORM set_config('lock_timeout', '250', true);
    PERFORM release_default_rows((cutoff - date '1970-01-01')::bigint * 10000000000, 0);
    SELECT h.* INTO part FROM history_partitions() h
    WHERE h.parent = 'receipt_payloads' AND h.end_day <= cutoff
    ORDER BY h.first_day LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The table's lock first, then what is kept is read: nothing written after the read
    -- can be dropped with the partition.
    LOCK TABLE ONLY receipt_payloads IN ACCESS EXCLUSIVE MODE;
    SELECT array_agg(p) INTO kept FROM receipt_payloads p
    WHERE p.tableoid = format('%I', part.partition)::regclass
      AND p.receipt_id >= (part.first_day - date '1970-01-01')::bigint * 10000000000
      AND p.receipt_id < (part.end_day - date '1970-01-01')::bigint * 10000000000
      AND p.receipt_id IN (SELECT held_receipts(
              (part.first_day - date '1970-01-01')::bigint * 10000000000,
              (part.end_day - date '1970-01-01')::bigint * 10000000000));
    IF cardinality(kept) > 10000 THEN
        RAISE EXCEPTION 'the payloads of % are kept for % receipts that are not done, queued or have an effect not closed (more than 10,000): deal with them first (inboundctl receipts list, effects list)',
            part.first_day, cardinality(kept);
    END IF;
    EXECUTE format('ALTER TABLE receipt_payloads DETACH PARTITION %I', part.partition);
    INSERT INTO receipt_payloads SELECT * FROM unnest(kept);
    day := part.first_day;
    carried := coalesce(cardinality(kept), 0);
    RETURN NEXT;
END
$$;

-- Removes what the default partitions hold that may go (release_default_rows), then
-- drops the oldest key period wholly older than `older_than_days` (never the current or
-- the previous one): its receipts, effects, attempts and keys, carrying the receipts
-- retention keeps (with all their effects and attempts) into the default partitions.
-- That period with how many receipts it carried, or no row; one period per call, as
-- drop_payload_days_at.
CREATE FUNCTION drop_key_periods_at(older_than_days integer, at timestamptz)
    RETURNS TABLE (period date, carried bigint) LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    cutoff date := date '1970-01-01' + history_day(at)
                   - least(greatest(older_than_days, 1), 36500);
    probed date := key_period(at) - 90;
    period_end date;
    part record;
    held bigint[];
    kept_receipts receipts[];
    kept_effects effects[];
    kept_attempts effect_attempts[];
BEGIN
    PERFORM set_config('lock_timeout', '250', true);
    PERFORM release_default_rows(0, (least(cutoff, probed) - date '1970-01-01')::bigint * 10000000000);
    SELECT min(h.end_day) INTO period_end FROM history_partitions() h
    WHERE h.parent <> 'receipt_payloads' AND h.end_day <= cutoff AND h.end_day <= probed;
    IF period_end IS NULL THEN
        RETURN;
    END IF;
    -- The tables' locks first, then what is kept is read: a worker finishing a receipt
    -- or recording an effect of this period commits before the read, or waits until the
    -- drop is done — never between the two. The order is the writers': a worker records
    -- an effect before it finishes its receipt, the dispatcher writes an effect before
    -- its attempt, the ingress's statement locks receipts before it claims a key.
    LOCK TABLE ONLY effects, ONLY effect_attempts, ONLY receipts, ONLY receipt_keys
        IN ACCESS EXCLUSIVE MODE;
    -- What is kept: the held receipts of the period, their effects (one whose receipt
    -- already sits in a default partition too) and those effects' attempts, wherever
    -- they are in this period's partitions.
    held := ARRAY(SELECT held_receipts(
              (period_end - 90 - date '1970-01-01')::bigint * 10000000000,
              (period_end - date '1970-01-01')::bigint * 10000000000));
    IF cardinality(held) > 10000 THEN
        RAISE EXCEPTION 'the key period ending % keeps % receipts that are not done, queued or have an effect not closed (more than 10,000): deal with them first (inboundctl receipts list, effects list)',
            period_end, cardinality(held);
    END IF;
    SELECT array_agg(r) INTO kept_receipts FROM receipts r
    WHERE r.tableoid <> 'receipts_default'::regclass AND r.id = ANY (held);
    SELECT array_agg(e) INTO kept_effects FROM effects e
    WHERE e.tableoid <> 'effects_default'::regclass AND e.receipt_id = ANY (held);
    SELECT array_agg(a) INTO kept_attempts FROM effect_attempts a
    WHERE a.tableoid <> 'effect_attempts_default'::regclass
      AND a.effect_id IN (SELECT e.id FROM effects e WHERE e.receipt_id = ANY (held));
    -- Detached, not dropped, under the locks: removing a period's files takes a while
    -- (gigabytes), and drop_detached_history does it in a transaction of its own, with no
    -- lock a writer needs.
    FOR part IN SELECT * FROM history_partitions() h
                WHERE h.parent <> 'receipt_payloads' AND h.end_day = period_end LOOP
        EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', part.parent, part.partition);
    END LOOP;
    INSERT INTO receipts SELECT * FROM unnest(kept_receipts);
    INSERT INTO effects SELECT * FROM unnest(kept_effects);
    INSERT INTO effect_attempts OVERRIDING SYSTEM VALUE SELECT * FROM unnest(kept_attempts);
    period := period_end - 90;
    carried := coalesce(cardinality(kept_receipts), 0);
    RETURN NEXT;
END
$$;

-- Drops one history partition that retention detached (a table named as a partition of
-- inbound's history that is no longer attached): its name, or NULL when none is left. No
-- writer waits for it: nothing refers to a detached table. The caller calls it after each
-- drop, until NULL.
CREATE FUNCTION drop_detached_history() RETURNS text LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    detached text;
BEGIN
    SELECT c.relname INTO detached FROM pg_class c
    WHERE c.relnamespace = (SELECT r.relnamespace FROM pg_class r WHERE r.oid = 'receipts'::regclass)
      AND c.relkind = 'r'
      AND c.relname ~ '^(receipts|receipt_payloads|receipt_keys|effects|effect_attempts)_[0-9]{8}$'
      AND NOT c.relispartition
    ORDER BY c.relname LIMIT 1;
    IF detached IS NOT NULL THEN
        EXECUTE format('DROP TABLE %I', detached);
    END IF;
    RETURN detached;
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

-- After a replay or close of `receipt` (in the decision's transaction, its own statement):
-- when it was an ordered subject's and no failed or quarantined receipt of the subject is
-- left, the subject's hold (its subject_leases row that never expires) goes, and the
-- subject runs again. The hold's row is locked first and the holders read after, in a
-- statement of their own: a receipt another transaction is failing or quarantining at
-- the same time writes that row too, so it is either seen here or waits for this.
CREATE FUNCTION release_subject_hold(receipt bigint)
    RETURNS void LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    held_integration text;
    held_subject text;
BEGIN
    SELECT r.integration, r.subject INTO held_integration, held_subject FROM receipts r
    WHERE r.id = receipt AND r.ordered AND r.status NOT IN ('failed', 'quarantined');
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM 1 FROM subject_leases l
    WHERE l.integration = held_integration AND l.subject = held_subject
      AND l.leased_until = 'infinity'
    FOR UPDATE;
    DELETE FROM subject_leases l
    WHERE l.integration = held_integration AND l.subject = held_subject
      AND l.leased_until = 'infinity'
      AND NOT EXISTS (SELECT 1 FROM receipts o
                      WHERE o.integration = held_integration AND o.subject = held_subject
                        AND o.ordered AND o.status IN ('failed', 'quarantined'));
END;
$$;

-- The plpgsql functions above name tables unqualified: fix their search_path to this
-- schema with pg_temp last, so that no caller's temporary table stands in for one.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION ensure_history_partitions(timestamptz, integer) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION history_attach(text, text, integer, integer) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION drop_payload_days_at(integer, timestamptz) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION drop_key_periods_at(integer, timestamptz) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION drop_detached_history() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION release_subject_hold(bigint) SET search_path = %I, pg_temp', current_schema());
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
                         WHERE p.receipt_id = r.id), 0) AS size,
               CASE WHEN r.ordered THEN r.subject END AS queue_subject,
               coalesce(r.event_at, r.received_at) AS ordered_at
        FROM receipts r WHERE r.id = receipt AND r.status IN ('failed', 'quarantined')
        FOR UPDATE OF r
    ), logged AS (
        INSERT INTO receipt_replays (receipt_id, previous_status, replayed_by, reason)
        SELECT held.id, held.status, person, why FROM held
    ), queued AS (
        -- An ordered receipt takes its place in its subject's order again.
        INSERT INTO receipt_queue (receipt_id, integration, visible_at, enqueued_at, payload_bytes,
                                   subject, ordered_at)
        SELECT held.id, held.integration, now(), now(), held.size,
               held.queue_subject, held.ordered_at
        FROM held
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
        RETURNING q.receipt_id, q.integration, q.subject
    ), held AS (
        -- An ordered receipt taken out holds its subject (a worker holding its lease
        -- loses it: the row now says the subject is held).
        INSERT INTO subject_leases (integration, subject, lease_token, leased_until)
        SELECT integration, subject, 0, 'infinity' FROM dequeued WHERE subject IS NOT NULL
        ON CONFLICT (integration, subject) DO UPDATE SET lease_token = 0, leased_until = 'infinity'
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
                                  deliveries text[], subjects text[], event_ats timestamptz[],
                                  ordereds boolean[])
    RETURNS TABLE (out_position bigint, out_id bigint) LANGUAGE sql SECURITY DEFINER
BEGIN ATOMIC
    WITH input AS (
        SELECT * FROM unnest(integrations, source_scopes, event_ids, event_types, route_keys,
                             payloads, deliveries, subjects, event_ats, ordereds)
            WITH ORDINALITY AS input (integration, source_scope, event_id, event_type,
                                      route_key, payload, delivery, subject, event_at,
                                      ordered, position)
    ), new AS (
        SELECT * FROM claim_receipt_keys(integrations, source_scopes, event_ids,
                                         array_fill(NULL::bytea, ARRAY[cardinality(event_ids)]),
                                         NULL)
    ), inserted AS (
        INSERT INTO receipts (integration, source_scope, event_id, event_type, route_key,
                              delivery, provenance, subject, event_at, ordered)
        SELECT input.integration, input.source_scope, input.event_id, input.event_type,
               input.route_key, input.delivery::jsonb, 'api', input.subject, input.event_at,
               input.ordered AND input.subject IS NOT NULL
        FROM input JOIN new USING (source_scope, event_id) ORDER BY input.position
        RETURNING receipts.id, receipts.integration, receipts.source_scope,
                  receipts.event_id, receipts.received_at
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
    SELECT input.position, inserted.id
    FROM inserted JOIN input USING (source_scope, event_id)
    LEFT JOIN durable ON true;
END;

-- Functions are executable by everyone unless revoked: only the operator role (granted
-- by store/roles.rs) may call these.
REVOKE EXECUTE ON FUNCTION drop_payload_days(integer), drop_key_periods(integer),
    drop_payload_days_at(integer, timestamptz), drop_key_periods_at(integer, timestamptz),
    release_default_rows(bigint, bigint), drop_detached_history(),
    ensure_history_partitions(timestamptz, integer), history_attach(text, text, integer, integer),
    decision_lock_receipt(bigint), decision_make_receipt_due(bigint, text, text),
    decision_requeue_receipt(bigint, text, text), decision_take_receipt_out(bigint, text, text, text),
    decision_close_receipt(bigint, text, text), release_subject_hold(bigint),
    decision_lock_effect(bigint),
    decision_resolve_effect(bigint, text, text, text),
    backfill_receipts(text[], text[], text[], text[], text[], text[], text[], text[],
                      timestamptz[], boolean[]) FROM PUBLIC;
