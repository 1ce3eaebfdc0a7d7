-- Revert runq:stop_failures from pg

BEGIN;

DROP FUNCTION runq._stop_failure(runq.runs, boolean, timestamptz);
DROP FUNCTION runq._budget_overrun(bigint, jsonb);
DROP FUNCTION runq._is_reached(jsonb, jsonb);

COMMIT;
