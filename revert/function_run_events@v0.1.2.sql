-- Revert runq:function_run_events from pg

BEGIN;

DROP FUNCTION runq.run_events(bigint);

COMMIT;
