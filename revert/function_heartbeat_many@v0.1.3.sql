-- Revert runq:function_heartbeat_many from pg

BEGIN;

DROP FUNCTION runq.heartbeat_many(bigint[], bigint[]);

COMMIT;
