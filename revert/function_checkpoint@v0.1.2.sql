-- Revert runq:function_checkpoint from pg

BEGIN;

DROP FUNCTION runq.checkpoint(bigint, bigint, jsonb);

COMMIT;
