-- Revert runq:function_ask_user from pg

BEGIN;

DROP FUNCTION runq.ask_user(bigint, bigint, jsonb);

COMMIT;
