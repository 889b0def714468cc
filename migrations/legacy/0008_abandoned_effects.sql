-- Effects abandoned before `abandoned` existed were written as `failed` with this prefix.
-- Its own migration, so that the row locks of this update are all it holds: the
-- exclusive lock of 0007's ALTER TABLE was released when 0007 committed.
UPDATE effects SET status = 'abandoned'
WHERE status = 'failed' AND last_error LIKE 'abandoned: %';
