-- Revert runq:function_create_schedule from pg

BEGIN;

DROP FUNCTION runq.create_schedule(text, text, text, text, interval, jsonb, integer, text, integer, text, interval, interval);

COMMIT;
