-- Deploy runq:column_runs_watched to pg
-- requires: table_runs
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (no row is rewritten), waiting at most 2 s for it.

BEGIN;

-- Whether a session may be watching the run (runq.watch). A transition that
-- may concern a watcher reads it on the row it updates anyway, so a run that
-- nobody watches pays no lookup and sends no notification (a NOTIFY
-- serialises commits). NULL, not false: a NULL column is stored in the
-- catalog, no row rewritten, so the lock is brief on any number of runs.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs ADD COLUMN watched boolean;

COMMENT ON COLUMN runq.runs.watched IS
    'True while some session may be watching the run (runq.watch): its transitions to a terminal status or waiting_for_user, and its output, send NOTIFY runq_run. NULL or false: nobody watches.';

COMMIT;
