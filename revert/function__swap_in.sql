-- Revert runq:function__swap_in from pg

BEGIN;

DROP FUNCTION runq._swap_in(integer[], text[], integer);

COMMIT;
