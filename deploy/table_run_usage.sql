-- Deploy runq:table_run_usage to pg
-- requires: table_runs
-- Locks: SHARE ROW EXCLUSIVE on runq.runs for the foreign key (no row is read: the new table is empty), waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A run's usage totals, one row per run that recorded any (runq.record_usage
-- adds to it; none: no row, shown as {}). A table of its own, not a column of
-- runs: a model call's usage then writes one narrow row with one index, where
-- an update of runs checks the run's shape and opens each of its indexes,
-- and often moves the row (totals grow) off a HOT chain into all of them.
-- The run.usage events of runq.run_events are the ledger these sum.
-- ON DELETE CASCADE: a record that commits after a purge's snapshot but
-- before its row lock adds a row the purge's own DELETE cannot see; the
-- cascade, run with a fresh snapshot, takes it with the run.
CREATE TABLE runq.run_usage (
    run_id bigint NOT NULL PRIMARY KEY REFERENCES runq.runs (run_id) ON DELETE CASCADE,
    usage  jsonb  NOT NULL
);

COMMENT ON TABLE runq.run_usage IS
    'Usage totals of each run that recorded any (runq.record_usage), summed per key across all attempts as exact numerics; the run.usage events are the ledger.';

COMMIT;
