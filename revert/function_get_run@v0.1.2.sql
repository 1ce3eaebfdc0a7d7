-- Revert runq:function_get_run from pg

BEGIN;

DROP FUNCTION runq.get_run(bigint);

COMMIT;
