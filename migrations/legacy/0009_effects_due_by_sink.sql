-- no-transaction
-- The dispatcher claims per sink (each sink has its own concurrency and circuit breaker,
-- and a worker claims only the sinks it is configured for): due effects of one sink in
-- due order. Built concurrently; an interrupted build is repaired by
-- `inbound_core::store::migrate` before the migrations run.
CREATE INDEX CONCURRENTLY IF NOT EXISTS effects_due_by_sink ON effects (sink, visible_at, id)
    WHERE status IN ('pending', 'in_flight', 'uncertain');
