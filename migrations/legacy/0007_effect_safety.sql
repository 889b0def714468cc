-- Effects stay safe when sinks are slow, lying or misconfigured. Every statement holds
-- its lock for an instant (constant defaults; a check constraint only widened, added NOT
-- VALID because every existing row met the narrower one), and `inbound_core::store::
-- migrate` waits for each lock at most 2 s and retries.

-- Reconciliations are counted apart from delivery attempts, so that they back off on
-- their own count; `uncertain_since` starts the reconciliation horizon, after which the
-- effect goes to review.
ALTER TABLE effects
    ADD COLUMN reconciliations integer NOT NULL DEFAULT 0,
    ADD COLUMN uncertain_since timestamptz;

-- `abandoned`: an operator closed the effect unsent (`effects resolve --abandon`). Unlike
-- `failed` (the sink refused it, and an operator may still retry it), it is closed, so
-- retention may purge it with its receipt.
ALTER TABLE effects DROP CONSTRAINT IF EXISTS effects_status_check;
ALTER TABLE effects ADD CONSTRAINT effects_status_check
    CHECK (status IN ('pending', 'in_flight', 'completed', 'failed', 'uncertain', 'review', 'abandoned'))
    NOT VALID;
