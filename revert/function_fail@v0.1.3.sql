-- Revert runq:function_fail from pg

BEGIN;

DROP FUNCTION runq.fail(bigint, bigint, jsonb);

COMMIT;
