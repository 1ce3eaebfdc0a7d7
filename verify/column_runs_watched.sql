-- Verify runq:column_runs_watched on pg

BEGIN;

SELECT watched FROM runq.runs WHERE false;

ROLLBACK;
