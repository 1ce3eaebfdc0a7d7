-- Verify runq:columns_runs_deadline on pg

BEGIN;

SELECT timeout, deadline FROM runq.runs WHERE false;

ROLLBACK;
