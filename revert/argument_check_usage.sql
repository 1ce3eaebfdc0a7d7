-- Revert runq:argument_check_usage from pg

BEGIN;

DROP FUNCTION runq._check_usage(text, jsonb, boolean);
DROP FUNCTION runq._is_usage(jsonb);

COMMIT;
