-- Revert runq:table_run_output from pg
-- Locks: ACCESS EXCLUSIVE on runq.run_output, which goes (no other table is touched).

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP TABLE runq.run_output;

COMMIT;
