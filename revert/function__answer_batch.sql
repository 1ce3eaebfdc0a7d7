-- Revert runq:function__answer_batch from pg

BEGIN;

DROP FUNCTION runq._answer_batch(bigint[], bigint[], jsonb[], bigint[], text, boolean);

COMMIT;
