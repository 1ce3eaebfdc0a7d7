-- Deploy runq:column_runs_parked to pg
-- requires: table_runs
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (no row is rewritten), waiting at most 2 s for it.

BEGIN;

-- A constant default: PostgreSQL 11+ stores it in the catalog and rewrites no
-- row, so this is a brief ACCESS EXCLUSIVE lock however many runs there are.
-- The lock still queues behind any open transaction on runs (and every writer
-- queues behind it), hence the short lock timeout: retry the deploy if it hits.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs ADD COLUMN parked boolean NOT NULL DEFAULT false;

COMMENT ON COLUMN runq.runs.parked IS
    'A queued run held out of the claim''s indexes, for a concurrency limit, a pause, or until due under a limit; meaningful only while status = ''queued''.';

COMMIT;
