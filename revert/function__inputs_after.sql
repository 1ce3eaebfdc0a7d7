-- Revert runq:function__inputs_after from pg

BEGIN;

DROP FUNCTION runq._inputs_after(bigint, bigint);

COMMIT;
