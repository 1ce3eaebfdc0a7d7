-- Revert runq:function_cancel from pg

BEGIN;

DROP FUNCTION runq.cancel(bigint, text);

COMMIT;
