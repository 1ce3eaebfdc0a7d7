-- Deploy runq:columns_runs_deadline to pg
-- requires: table_runs
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (no row is rewritten), waiting at most 2 s for it.

BEGIN;

-- No default: NULL columns are added in the catalog alone, so the lock is
-- brief on any number of runs (see deploy/column_runs_parked.sql). Plain
-- interval, not runq.duration: a new column of a domain with a CHECK makes
-- PostgreSQL rewrite the table to check every row's NULL against it. submit,
-- the only writer, checks the rule (runq._check_duration).
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs
    ADD COLUMN timeout interval,
    ADD COLUMN deadline timestamptz;

COMMENT ON COLUMN runq.runs.timeout IS
    'submit''s timeout: the run must be terminal this long after its submit (or after a redrive of a run that missed it). NULL: none.';
COMMENT ON COLUMN runq.runs.deadline IS
    'created_at + timeout, or the redrive''s time + timeout: a run not terminal by then fails with deadline_exceeded. NULL exactly when timeout is.';

COMMIT;
