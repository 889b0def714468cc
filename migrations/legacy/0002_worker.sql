-- The worker's tables: the reference business domain (orders, entitlement_grants), the
-- effects outbox, and the audit trail of operator replays.

ALTER TABLE receipt_queue ADD COLUMN leased_at timestamptz;

-- Reference domain. Orders are created by the business with their PaymentIntent id.
CREATE TABLE orders (
    tenant_id             text        NOT NULL,
    id                    text        NOT NULL,
    provider_payment_id   text,
    total_minor           bigint      NOT NULL CHECK (total_minor >= 0),
    currency              text        NOT NULL,
    status                text        NOT NULL DEFAULT 'awaiting_payment'
                          CHECK (status IN ('awaiting_payment', 'paid', 'refunded', 'canceled')),
    amount_received_minor bigint,
    paid_receipt_id       bigint,
    paid_at               timestamptz,
    refunded_receipt_id   bigint,
    refunded_at           timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- One PaymentIntent pays one order: refunds find their order through it.
CREATE UNIQUE INDEX orders_payment ON orders (tenant_id, provider_payment_id)
    WHERE provider_payment_id IS NOT NULL;

-- The business key of a one-time grant is the primary key.
CREATE TABLE entitlement_grants (
    tenant_id   text        NOT NULL,
    account_id  text        NOT NULL,
    invoice_id  text        NOT NULL,
    entitlement text        NOT NULL,
    receipt_id  bigint      NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, account_id, invoice_id, entitlement)
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
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'in_flight', 'completed', 'failed', 'uncertain', 'review')),
    attempts         integer     NOT NULL DEFAULT 0,
    visible_at       timestamptz NOT NULL DEFAULT now(),
    lease_token      bigint      NOT NULL DEFAULT 0,
    first_attempt_at timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz
);

CREATE INDEX effects_open ON effects (visible_at, id)
    WHERE status IN ('pending', 'in_flight', 'uncertain');
CREATE INDEX effects_by_receipt ON effects (receipt_id);

-- Who sent a failed or quarantined receipt back to pending, and why.
CREATE TABLE receipt_replays (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id      bigint      NOT NULL,
    previous_status text        NOT NULL,
    replayed_by     text        NOT NULL,
    reason          text        NOT NULL,
    replayed_at     timestamptz NOT NULL DEFAULT now()
);

-- The receipt states other than done, for gauges and `inboundctl status` (the done rows,
-- the vast majority, are never counted).
CREATE INDEX receipts_finished ON receipts (finished_at) WHERE status = 'done';
