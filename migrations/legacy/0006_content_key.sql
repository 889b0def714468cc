-- no-transaction
-- The content key of integrations with `content_dedupe`: one receipt per body digest.
-- Built concurrently (receipts keep arriving). An interrupted build leaves an INVALID
-- index that `IF NOT EXISTS` would skip for ever; `inbound_core::store::migrate` rebuilds
-- any invalid index of ours before it runs the migrations, so a rerun is safe.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS receipts_content_key
    ON receipts (integration, content_digest) WHERE content_digest IS NOT NULL;
