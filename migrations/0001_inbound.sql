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
    outcome        text        CHECK (outcome IN ('applied', 'duplicate', 'ignored')),
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

-- Who sent a failed or quarantined receipt back to pending, and why.
CREATE TABLE receipt_replays (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id      bigint      NOT NULL,
    previous_status text        NOT NULL,
    replayed_by     text        NOT NULL,
    reason          text        NOT NULL,
    replayed_at     timestamptz NOT NULL DEFAULT now()
);

-- Operators' decisions about receipts (`inboundctl receipts quarantine|fail|close`):
-- `close` ends a failed or quarantined receipt done/ignored, its key kept.
CREATE TABLE receipt_resolutions (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id      bigint      NOT NULL,
    previous_status text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('quarantine', 'fail', 'close')),
    resolved_by     text        NOT NULL,
    reason          text        NOT NULL,
    resolved_at     timestamptz NOT NULL DEFAULT now()
);

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

CREATE TABLE effect_resolutions (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effect_id       bigint      NOT NULL REFERENCES effects (id) ON DELETE CASCADE,
    previous_status text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('completed', 'retry', 'abandon')),
    resolved_by     text        NOT NULL,
    note            text        NOT NULL,
    resolved_at     timestamptz NOT NULL DEFAULT now()
);
