-- Deploy runq:type_run_info to pg
-- requires: type_run_info@v0.2.0

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A child run's parent (runq.spawn), after deadline: the contract appends
-- columns at the end, so every reader of the first ones still works. No
-- table has a column of this type, so nothing is rewritten; get_run,
-- list_runs and dead_letter fill it (their changes come later in the plan).
ALTER TYPE runq.run_info ADD ATTRIBUTE parent_run_id bigint;

COMMIT;
