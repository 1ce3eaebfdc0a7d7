-- Revert runq:function_release from pg

BEGIN;

DROP FUNCTION runq.release(bigint, bigint);

COMMIT;
