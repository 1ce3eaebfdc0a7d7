-- Revert runq:function_unwatch from pg

BEGIN;

DROP FUNCTION runq.unwatch(bigint);

COMMIT;
