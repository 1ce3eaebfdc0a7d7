-- Deploy runq:column_runs_schedule to pg
-- requires: table_runs
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (no row is rewritten), waiting at most 2 s for it.

BEGIN;

-- The schedule whose slot created the run (runq.tick), NULL for a submitted
-- run. No default: a NULL column is stored in the catalog, no row rewritten,
-- so the lock is brief on any number of runs. Plain text, no domain: a new
-- column of a domain with a CHECK makes PostgreSQL rewrite the table to check
-- every row's NULL against it (tick copies a name runq.identifier checked).
-- No foreign key: a run outlives its schedule (drop_schedule leaves the runs
-- it created as they are), and a schedule created again under that name
-- finds them (runs_schedule_active_key).
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs ADD COLUMN schedule text;

COMMENT ON COLUMN runq.runs.schedule IS
    'The schedule (runq.schedule_settings.name) whose slot created the run; NULL for a submitted run.';

COMMIT;
