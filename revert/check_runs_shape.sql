-- Revert runq:check_runs_shape from pg

BEGIN;

SET LOCAL lock_timeout = '2s';

ALTER TABLE runq.runs DROP CONSTRAINT runs_shape_consistent;

COMMIT;
