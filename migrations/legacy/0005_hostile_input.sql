-- What the receipt path needs to stay bounded and fenced under hostile or unlucky input.
-- Every statement here holds its lock for an instant (no statement rewrites or scans a
-- table), and `inbound_core::store::migrate` waits for each lock at most 2 s and retries,
-- so a long transaction elsewhere delays the migration instead of stalling every claim
-- behind it.

-- Claims are bounded by payload bytes as well as by count: the queue row carries its
-- receipt's payload size so the claim can stop before the budget without reading payloads.
-- A constant default and no constraint: adding it touches no row, so the exclusive lock
-- lasts an instant. Receipts queued before it count as 0 bytes until they finish.
ALTER TABLE receipt_queue ADD COLUMN payload_bytes integer NOT NULL DEFAULT 0;

-- Fencing tokens come from one sequence, so a receipt's token only ever grows, across
-- replays too: a worker stalled with a token from an earlier life can never match. The
-- per-row counters it replaces counted claims beside `attempts` (an integer), so every
-- token issued before this migration is below 2^31, where the sequence starts.
CREATE SEQUENCE receipt_lease_tokens AS bigint START WITH 2147483648;

-- Opt-in content dedupe (GitHub signs no timestamp and no delivery id): the SHA-256 of
-- the raw body, unique within an integration while the receipt is kept. The unique index
-- is built concurrently by the next migration.
ALTER TABLE receipts ADD COLUMN content_digest bytea;

-- Operators' decisions about pending receipts (`inboundctl receipts quarantine|fail`):
-- who, why, and from which state.
CREATE TABLE receipt_resolutions (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receipt_id      bigint      NOT NULL,
    previous_status text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('quarantine', 'fail')),
    resolved_by     text        NOT NULL,
    reason          text        NOT NULL,
    resolved_at     timestamptz NOT NULL DEFAULT now()
);
