-- Deploy runq:type_run_info to pg
-- requires: schema_runq

BEGIN;

-- The row runq.get_run returns. A composite type rather than RETURNS TABLE:
-- PL/pgSQL refuses an output column named like the run_id parameter.
CREATE TYPE runq.run_info AS (
    run_id            bigint,
    tenant_id         text,
    session_id        text,
    kind              text,
    status            text,
    priority          integer,
    attempts          integer,
    max_attempts      integer,
    scheduled_for     timestamptz,
    lease_epoch       bigint,
    cancel_requested  boolean,
    result            jsonb,
    failure           jsonb,
    question          jsonb,
    created_at        timestamptz,
    updated_at        timestamptz,
    finished_at       timestamptz
);

COMMENT ON TYPE runq.run_info IS 'One run as runq.get_run shows it.';

COMMIT;
