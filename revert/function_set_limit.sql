-- Revert runq:function_set_limit from pg

BEGIN;

DROP FUNCTION runq.set_limit(text, text, integer);

COMMIT;
