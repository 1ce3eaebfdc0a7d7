-- Revert runq:function_resume from pg

BEGIN;

DROP FUNCTION runq.resume(text, text);

COMMIT;
