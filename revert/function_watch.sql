-- Revert runq:function_watch from pg

BEGIN;

DROP FUNCTION runq.watch(bigint);

COMMIT;
