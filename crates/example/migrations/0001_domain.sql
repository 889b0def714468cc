-- The reference business domain, in schema inbound_example (its statements qualify their
-- names; the migration history is inbound_example._sqlx_migrations). Orders are created
-- by the business with their PaymentIntent id.
--
-- An installation from before inbound had its own schema has these tables beside the
-- renamed old history (`inbound_legacy_migrations`, left there when inbound's own objects
-- moved): they are adopted, data and all, instead of being created empty.
DO $$
DECLARE
    legacy text;
BEGIN
    -- Through the catalog, not to_regclass: naming a schema the role may not use (pg_toast,
    -- another team's) is an error for a role that is not a superuser.
    SELECT n.nspname INTO legacy
    FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid AND c.relkind = 'r'
    WHERE c.relname IN ('inbound_legacy_migrations', 'orders', 'entitlement_grants')
    GROUP BY n.nspname
    HAVING count(DISTINCT c.relname) = 3
    ORDER BY n.nspname
    LIMIT 1;
    IF legacy IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %I.orders SET SCHEMA inbound_example', legacy);
        EXECUTE format('ALTER TABLE %I.entitlement_grants SET SCHEMA inbound_example', legacy);
    ELSE
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
            created_at            timestamptz NOT NULL DEFAULT now(),
            updated_at            timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, id)
        );

        -- One PaymentIntent pays one order: refunds find their order through it.
        CREATE UNIQUE INDEX orders_payment ON inbound_example.orders (tenant_id, provider_payment_id)
            WHERE provider_payment_id IS NOT NULL;

        -- The business key of a one-time grant is the primary key.
        CREATE TABLE inbound_example.entitlement_grants (
            tenant_id   text        NOT NULL,
            account_id  text        NOT NULL,
            invoice_id  text        NOT NULL,
            entitlement text        NOT NULL,
            receipt_id  bigint      NOT NULL,
            granted_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, account_id, invoice_id, entitlement)
        );
    END IF;
END
$$;
