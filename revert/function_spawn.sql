-- Revert runq:function_spawn from pg

BEGIN;

DROP FUNCTION runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb);

COMMIT;
