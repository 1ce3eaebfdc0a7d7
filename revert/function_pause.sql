-- Revert runq:function_pause from pg

BEGIN;

DROP FUNCTION runq.pause(text, text, text);

COMMIT;
