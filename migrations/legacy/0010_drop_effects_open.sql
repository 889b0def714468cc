-- no-transaction
-- The dispatcher claims per sink through `effects_due_by_sink` (0009). The old index of
-- all due effects in due order is no longer needed, and worse: the planner preferred it
-- for the per-sink lookups and filtered out every other sink's backlog row by row, so a
-- sink down for days slowed every claim of every worker. Dropped concurrently.
DROP INDEX CONCURRENTLY IF EXISTS effects_open;
