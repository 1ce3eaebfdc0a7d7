-- Verify runq:column_runs_budget on pg

BEGIN;

SELECT budget FROM runq.runs WHERE false;

ROLLBACK;
