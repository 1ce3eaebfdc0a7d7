-- Revert runq:function_read_output from pg

BEGIN;

DROP FUNCTION runq.read_output(bigint, bigint, integer);

COMMIT;
