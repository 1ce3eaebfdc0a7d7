-- Revert runq:function_model_calls from pg

BEGIN;

DROP FUNCTION runq.model_calls(bigint);

COMMIT;
