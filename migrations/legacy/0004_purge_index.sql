-- no-transaction
-- Payload purge walks only done receipts that still hold a payload. Through
-- `receipts_finished` every batch re-read the payloads earlier batches had dropped, so
-- purging N payloads cost O(N²) (200,000 took 21 s, 100,000 took 4 s). Built
-- concurrently: receipts keep arriving while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS receipts_payload_held ON receipts (finished_at)
    WHERE status = 'done' AND payload IS NOT NULL;
