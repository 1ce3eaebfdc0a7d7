-- Revert runq:function_drop_schedule from pg

BEGIN;

DROP FUNCTION runq.drop_schedule(text);

COMMIT;
