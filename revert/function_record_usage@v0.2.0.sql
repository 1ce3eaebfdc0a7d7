-- Revert runq:function_record_usage from pg

BEGIN;

DROP FUNCTION runq.record_usage(bigint, bigint, jsonb);

COMMIT;
