-- Verify runq:table_run_usage on pg

BEGIN;

SELECT run_id, usage FROM runq.run_usage WHERE false;

ROLLBACK;
