-- Deploy runq:column_runs_budget to pg
-- requires: table_runs
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (no row is rewritten), waiting at most 2 s for it.

BEGIN;

-- No default: a NULL column is stored in the catalog, no row rewritten, so
-- the lock is brief on any number of runs. Plain jsonb, no domain: a new
-- column of a domain with a CHECK makes PostgreSQL rewrite the table to check
-- every row's NULL against it. The rule (runq._is_usage) is applied by the
-- only writers, submit and set_budget, through runq._check_usage.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs ADD COLUMN budget jsonb;

COMMENT ON COLUMN runq.runs.budget IS
    'Limits on usage across all attempts: begin_turn fails the run once a total (runq.run_usage) reaches its limit. NULL: none.';

COMMIT;
