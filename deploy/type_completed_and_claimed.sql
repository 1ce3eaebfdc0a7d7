-- Deploy runq:type_completed_and_claimed to pg
-- requires: schema_runq

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The rows of runq.complete_and_claim: whether the run given was completed,
-- then the columns of runq.claim, in its order. A type of its own, not
-- RETURNS TABLE: the function's first arguments are named run_id and epoch,
-- as runq.complete's are, and a function's arguments and result columns
-- share one namespace.
CREATE TYPE runq.completed_and_claimed AS (
    completed        boolean,
    run_id           bigint,
    epoch            bigint,
    tenant_id        text,
    session_id       text,
    kind             text,
    priority         integer,
    payload          jsonb,
    attempt          integer,
    checkpoint       jsonb,
    inputs           jsonb,
    resumed          boolean,
    lease_expires_at timestamptz,
    deadline         timestamptz,
    budget           jsonb,
    usage            jsonb
);

COMMENT ON TYPE runq.completed_and_claimed IS
    'A row of runq.complete_and_claim: completed (what runq.complete answered; NULL when no run was given), then a row of runq.claim (all NULL when nothing was claimed).';

COMMIT;
