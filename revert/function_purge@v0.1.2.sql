-- Revert runq:function_purge from pg

BEGIN;

DROP FUNCTION runq.purge(interval, integer, boolean);

COMMIT;
