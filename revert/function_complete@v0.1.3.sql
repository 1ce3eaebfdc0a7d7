-- Revert runq:function_complete from pg

BEGIN;

DROP FUNCTION runq.complete(bigint, bigint, jsonb);

COMMIT;
