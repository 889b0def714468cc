-- The team's own table, in its own schema (history in subscriptions_example._sqlx_migrations).
-- One row per subscription; the ordering guard is the provider's event time (`created`,
-- seconds) with the event id as a tie-break: a late event never regresses newer state.
CREATE TABLE subscriptions_example.subscriptions (
    tenant_id        text        NOT NULL,
    subscription_id  text        NOT NULL,
    customer_id      text        NOT NULL,
    status           text        NOT NULL,
    price_id         text,
    deleted          boolean     NOT NULL DEFAULT false,
    -- The event the row reflects: (event_created, event_id) only ever grows.
    event_created    bigint      NOT NULL,
    event_id         text        NOT NULL,
    receipt_id       bigint      NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, subscription_id)
);
