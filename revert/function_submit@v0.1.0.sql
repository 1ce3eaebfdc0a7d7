-- Revert runq:function_submit from pg

BEGIN;

DROP FUNCTION runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval);

COMMIT;
