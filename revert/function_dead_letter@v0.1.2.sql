-- Revert runq:function_dead_letter from pg

BEGIN;

DROP FUNCTION runq.dead_letter(integer);

COMMIT;
