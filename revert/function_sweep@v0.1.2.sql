-- Revert runq:function_sweep from pg

BEGIN;

DROP FUNCTION runq.sweep(integer);

COMMIT;
