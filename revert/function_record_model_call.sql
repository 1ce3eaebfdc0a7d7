-- Revert runq:function_record_model_call from pg

BEGIN;

DROP FUNCTION runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb);

COMMIT;
