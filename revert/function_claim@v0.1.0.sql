-- Revert runq:function_claim from pg

BEGIN;

DROP FUNCTION runq.claim(integer[], text, interval, integer);

COMMIT;
