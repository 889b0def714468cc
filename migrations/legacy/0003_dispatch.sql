-- The dispatcher's bookkeeping: who holds an effect's lease, whether any attempt may
-- have reached the sink, every attempt and reconciliation, and operator resolutions.

ALTER TABLE effects
    ADD COLUMN leased_by text,
    -- True once any attempt may have reached the sink (timeout, reset, 5xx, a worker that
    -- died in flight): from then on only an idempotent sink within its retention, or a
    -- person, may cause another send.
    ADD COLUMN maybe_delivered boolean NOT NULL DEFAULT false,
    ADD COLUMN last_status_code integer;

CREATE INDEX effects_open_by_sink ON effects (sink, created_at)
    WHERE status IN ('pending', 'in_flight', 'uncertain');
CREATE INDEX effects_status ON effects (status);

CREATE TABLE effect_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effect_id   bigint      NOT NULL REFERENCES effects (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL,
    -- 'delivery' (a POST) or 'reconcile' (a GET of status_url)
    kind        text        NOT NULL CHECK (kind IN ('delivery', 'reconcile')),
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    outcome     text,
    status_code integer,
    error       text
);
CREATE INDEX effect_attempts_by_effect ON effect_attempts (effect_id, id);

CREATE TABLE effect_resolutions (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effect_id       bigint      NOT NULL REFERENCES effects (id) ON DELETE CASCADE,
    previous_status text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('completed', 'retry', 'abandon')),
    resolved_by     text        NOT NULL,
    note            text        NOT NULL,
    resolved_at     timestamptz NOT NULL DEFAULT now()
);
