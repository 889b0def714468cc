-- The reference business domain, in schema inbound_example (its statements qualify their
-- names; the migration history is inbound_example._sqlx_migrations). Orders are created
-- by the business with their PaymentIntent id. The baseline: no release had shipped when
-- the history before it was folded in.
CREATE TABLE inbound_example.orders (
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
    -- While refunded: the status the refund ended ('paid', or 'canceled' after payment),
    -- which a failure of that refund restores, and the newest refund event seen for it
    -- (a failure reported before that one does not undo it).
    status_before_refund  text,
    refund_event_at       timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- One PaymentIntent pays one order: refunds find their order through it.
CREATE UNIQUE INDEX orders_payment ON inbound_example.orders (tenant_id, provider_payment_id)
    WHERE provider_payment_id IS NOT NULL;

-- Refunds that failed or were canceled after the order was marked refunded: the money never
-- went back, so the order is paid again. Keyed by the refund (its business key); the
-- failure's event time tells a stale `charge.refunded` (a snapshot from before the failure)
-- from a later, new refund of the same payment.
CREATE TABLE inbound_example.refund_failures (
    tenant_id           text        NOT NULL,
    refund_id           text        NOT NULL,
    provider_payment_id text        NOT NULL,
    amount_minor        bigint      NOT NULL,
    event_created_at    timestamptz NOT NULL,
    receipt_id          bigint      NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, refund_id)
);

CREATE INDEX refund_failures_payment
    ON inbound_example.refund_failures (tenant_id, provider_payment_id);

-- The business key of a one-time grant is the primary key. A Stripe invoice has exactly
-- one customer: a grant is also unique by the invoice and the entitlement, and the same
-- invoice named under a second customer is an inconsistency the handler quarantines (the
-- customer stays a column).
CREATE TABLE inbound_example.entitlement_grants (
    tenant_id   text        NOT NULL,
    account_id  text        NOT NULL,
    invoice_id  text        NOT NULL,
    entitlement text        NOT NULL,
    receipt_id  bigint      NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, account_id, invoice_id, entitlement),
    CONSTRAINT entitlement_grants_invoice_entitlement UNIQUE (tenant_id, invoice_id, entitlement)
);
