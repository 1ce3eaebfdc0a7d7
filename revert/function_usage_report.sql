-- Revert runq:function_usage_report from pg

BEGIN;

DROP FUNCTION runq.usage_report(timestamptz, timestamptz);

COMMIT;
