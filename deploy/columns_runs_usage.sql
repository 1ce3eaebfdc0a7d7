-- Deploy runq:columns_runs_usage to pg
-- requires: table_runs
-- requires: domain_usage_amounts
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (no row is rewritten), waiting at most 2 s for it.

BEGIN;

-- Constant defaults: stored in the catalog, no row rewritten (see
-- deploy/column_runs_parked.sql), so the lock is brief on any number of runs.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs
    ADD COLUMN usage jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN budget runq.usage_amounts;

COMMENT ON COLUMN runq.runs.usage IS
    'What every attempt of the run recorded (runq.record_usage), summed per key as exact numerics; its run.usage events are the ledger.';
COMMENT ON COLUMN runq.runs.budget IS
    'Limits on usage across all attempts: begin_turn fails the run once a total reaches its limit. NULL: none.';

COMMIT;
