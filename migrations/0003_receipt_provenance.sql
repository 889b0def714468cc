-- Where a receipt came from: 'webhook' (a delivery that verified: signed by the provider)
-- or 'api' (fetched over the provider's API with the account's key, by `inboundctl stripe
-- backfill`). A constant default adds the column without rewriting the table.
ALTER TABLE receipts ADD COLUMN provenance text NOT NULL DEFAULT 'webhook'
    CHECK (provenance IN ('webhook', 'api'));
