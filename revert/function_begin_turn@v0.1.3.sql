-- Revert runq:function_begin_turn from pg

BEGIN;

DROP FUNCTION runq.begin_turn(bigint, bigint);

COMMIT;
