-- Revert runq:function_heartbeat from pg

BEGIN;

DROP FUNCTION runq.heartbeat(bigint, bigint);

COMMIT;
