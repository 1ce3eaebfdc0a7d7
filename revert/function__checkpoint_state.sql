-- Revert runq:function__checkpoint_state from pg

BEGIN;

DROP FUNCTION runq._checkpoint_state(bigint, bigint);

COMMIT;
