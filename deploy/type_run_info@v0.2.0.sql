-- Deploy runq:type_run_info to pg
-- requires: type_run_info@v0.1.3
-- requires: column_runs_budget
-- requires: columns_runs_deadline

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A run's cost and time, after finished_at (the contract appends columns at
-- the end, so that every reader of the first ones still works). No table has
-- a column of this type, so nothing is rewritten; get_run and dead_letter
-- fill them (their changes come next in the plan).
ALTER TYPE runq.run_info
    ADD ATTRIBUTE usage jsonb,
    ADD ATTRIBUTE budget jsonb,
    ADD ATTRIBUTE deadline timestamptz;

COMMIT;
