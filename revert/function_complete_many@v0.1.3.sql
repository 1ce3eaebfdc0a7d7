-- Revert runq:function_complete_many from pg

BEGIN;

DROP FUNCTION runq.complete_many(bigint[], bigint[], jsonb[]);

COMMIT;
