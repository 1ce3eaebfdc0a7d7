-- Revert runq:function_tick from pg

BEGIN;

DROP FUNCTION runq.tick(integer);

COMMIT;
