-- Revert runq:function_set_budget from pg

BEGIN;

DROP FUNCTION runq.set_budget(bigint, jsonb);

COMMIT;
