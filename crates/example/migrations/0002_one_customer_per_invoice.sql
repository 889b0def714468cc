-- A Stripe invoice has exactly one customer: a grant is keyed by the invoice and the
-- entitlement, and the same invoice named under a second customer is an inconsistency
-- the handler quarantines (the customer stays a column). An installation that already
-- granted one invoice to two customers fails here, naming the duplicate key: resolve
-- those rows by hand (they are the inconsistency this rule now refuses), then migrate.
ALTER TABLE inbound_example.entitlement_grants
    ADD CONSTRAINT entitlement_grants_invoice_entitlement UNIQUE (tenant_id, invoice_id, entitlement);
