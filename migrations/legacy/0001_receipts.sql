-- Receipts: one row per accepted event, keyed by (source_scope, event_id), kept for history.
-- receipt_queue: the narrow hot table of unfinished work; a row leaves it when the receipt
-- reaches a terminal state, so claims scan only what is still to do.

CREATE TABLE receipts (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration    text        NOT NULL,
    source_scope   text        NOT NULL,
    event_id       text        NOT NULL,
    event_type     text        NOT NULL,
    -- The route key that matched at acceptance (GitHub: "event.action" or "event").
    route_key      text        NOT NULL,
    -- The validated payload; NULL once purged by retention.
    payload        jsonb,
    status         text        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'done', 'quarantined', 'failed')),
    outcome        text        CHECK (outcome IN ('applied', 'duplicate', 'ignored')),
    outcome_reason text,
    attempts       integer     NOT NULL DEFAULT 0,
    last_error     text,
    received_at    timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CONSTRAINT receipts_receipt_key UNIQUE (source_scope, event_id),
    CONSTRAINT receipts_outcome_only_when_done CHECK ((status = 'done') = (outcome IS NOT NULL))
);

CREATE INDEX receipts_status_received ON receipts (status, received_at)
    WHERE status <> 'done';

CREATE TABLE receipt_queue (
    receipt_id  bigint      PRIMARY KEY REFERENCES receipts (id) ON DELETE CASCADE,
    integration text        NOT NULL,
    -- Claimable when visible_at <= now(); a lease is simply visibility in the future.
    visible_at  timestamptz NOT NULL DEFAULT now(),
    attempts    integer     NOT NULL DEFAULT 0,
    -- Fencing token: incremented by every claim; completion must present the current one.
    lease_token bigint      NOT NULL DEFAULT 0,
    leased_by   text,
    last_error  text,
    enqueued_at timestamptz NOT NULL
);

CREATE INDEX receipt_queue_claimable ON receipt_queue (visible_at, receipt_id);
CREATE INDEX receipt_queue_integration_age ON receipt_queue (integration, enqueued_at);
