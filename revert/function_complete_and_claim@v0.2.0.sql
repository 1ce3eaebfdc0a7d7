-- Revert runq:function_complete_and_claim from pg

BEGIN;

DROP FUNCTION runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean);

COMMIT;
