-- Revert runq:function_wait_children from pg

BEGIN;

DROP FUNCTION runq.wait_children(bigint, bigint);

COMMIT;
