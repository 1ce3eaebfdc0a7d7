-- Revert runq:function_children from pg

BEGIN;

DROP FUNCTION runq.children(bigint);

COMMIT;
