-- Revert runq:function_emit from pg

BEGIN;

DROP FUNCTION runq.emit(bigint, bigint, jsonb[]);

COMMIT;
