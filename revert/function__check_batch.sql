-- Revert runq:function__check_batch from pg

BEGIN;

DROP FUNCTION runq._check_batch(bigint[], bigint[], jsonb[]);

COMMIT;
