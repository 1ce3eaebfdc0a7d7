-- Revert runq:function_recovery_totals from pg

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP FUNCTION runq.recovery_totals();

COMMIT;
