-- Deploy runq:type_run_event to pg
-- requires: schema_runq

BEGIN;

-- The row runq.run_events returns (see runq.run_info for why a type).
CREATE TYPE runq.run_event AS (
    event_id    bigint,
    epoch       bigint,
    type        text,
    payload     jsonb,
    created_at  timestamptz
);

COMMENT ON TYPE runq.run_event IS 'One event as runq.run_events shows it.';

COMMIT;
