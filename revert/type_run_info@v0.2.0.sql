-- Revert runq:type_run_info from pg
-- (back to runq.run_info as v0.1.3 released it)

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TYPE runq.run_info
    DROP ATTRIBUTE deadline,
    DROP ATTRIBUTE budget,
    DROP ATTRIBUTE usage;

COMMIT;
