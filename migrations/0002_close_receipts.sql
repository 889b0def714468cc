-- `inboundctl receipts close`: an operator's decision that a failed or quarantined
-- receipt will not be processed (it ends done/ignored; its key stays). The table holds
-- only operators' decisions (a few rows), so the brief exclusive lock of replacing the
-- check in this migration's transaction is nothing the live system waits on (only
-- inboundctl writes it).
ALTER TABLE receipt_resolutions
    DROP CONSTRAINT receipt_resolutions_action_check,
    ADD CONSTRAINT receipt_resolutions_action_check
        CHECK (action IN ('quarantine', 'fail', 'close')) NOT VALID;
ALTER TABLE receipt_resolutions VALIDATE CONSTRAINT receipt_resolutions_action_check;
