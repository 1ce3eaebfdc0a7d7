-- Revert runq:type_run_info from pg
-- (back to the run_info of v0.2.0)

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TYPE runq.run_info DROP ATTRIBUTE parent_run_id;

COMMIT;
