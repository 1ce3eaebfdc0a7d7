-- Revert runq:function_deliver_input from pg

BEGIN;

DROP FUNCTION runq.deliver_input(bigint, jsonb);

COMMIT;
