-- Revert runq:table_run_usage from pg

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The totals go; the run.usage events (the ledger) stay in runq.run_events.
DROP TABLE runq.run_usage;

COMMIT;
