-- Verify runq:column_runs_schedule on pg

BEGIN;

SELECT schedule FROM runq.runs WHERE false;

ROLLBACK;
