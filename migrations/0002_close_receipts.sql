-- `inboundctl receipts close`: an operator's decision that a failed or quarantined
-- receipt will not be processed (it ends done/ignored; its key stays). The new check is
-- added NOT VALID and validated separately: validation takes no lock that blocks
-- writers, and no existing row can break it.
ALTER TABLE receipt_resolutions
    DROP CONSTRAINT receipt_resolutions_action_check,
    ADD CONSTRAINT receipt_resolutions_action_check
        CHECK (action IN ('quarantine', 'fail', 'close')) NOT VALID;
ALTER TABLE receipt_resolutions VALIDATE CONSTRAINT receipt_resolutions_action_check;
