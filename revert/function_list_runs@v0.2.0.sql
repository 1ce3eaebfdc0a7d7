-- Revert runq:function_list_runs from pg

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP FUNCTION runq.list_runs(text, text, text, bigint, integer);

COMMIT;
