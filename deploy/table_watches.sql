-- Deploy runq:table_watches to pg
-- requires: table_runs
-- Locks: SHARE ROW EXCLUSIVE on runq.runs for the foreign key (no row is read: the new table is empty), waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Who watches which run (runq.watch, runq.unwatch): a session, named by its
-- backend's pid and start time (a pid alone is reused by a later session).
-- Watches of a session that ended are deleted by the sweep. ON DELETE
-- CASCADE: a purged run's watches go with it; a watch is rare, and its
-- foreign key check costs no transition anything.
CREATE TABLE runq.watches (
    run_id        bigint      NOT NULL REFERENCES runq.runs (run_id) ON DELETE CASCADE,
    pid           bigint      NOT NULL,
    backend_start timestamptz NOT NULL,
    PRIMARY KEY (run_id, pid, backend_start)
);

COMMENT ON TABLE runq.watches IS
    'The watches of runq.watch: a run and the session (backend pid and start time) that watches it, until that session calls runq.unwatch or ends.';

COMMIT;
