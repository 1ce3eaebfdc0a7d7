-- Verify runq:columns_runs_parent on pg

BEGIN;

SELECT parent_run_id, spawned, waiting_on FROM runq.runs WHERE false;

ROLLBACK;
