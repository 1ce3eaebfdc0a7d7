-- Revert runq:function_redrive from pg

BEGIN;

DROP FUNCTION runq.redrive(bigint, text);

COMMIT;
