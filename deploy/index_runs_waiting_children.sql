-- Deploy runq:index_runs_waiting_children to pg
-- requires: table_runs
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- The runs waiting for their children (runq.wait_children): queue_stats
-- counts them, and reverting the status reads it to find none is left. It is
-- built before the status exists, so that on an upgraded database it is
-- empty and stays as small as the runs that wait. A claim or a complete
-- writes no entry here (their runs are not waiting).
--
-- No BEGIN/COMMIT: CREATE INDEX CONCURRENTLY cannot run in a transaction.
-- What it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which submits, claims,
-- heartbeats and completes do not conflict with, for the whole build (two
-- scans of runs: minutes on 100 million runs), and it waits for every
-- transaction already open. Neither wait blocks a writer, so no timeout: one
-- would only leave an INVALID index behind. A failed build leaves one too;
-- this script drops such a leftover first, so deploying again is the remedy.
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_waiting_children_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_waiting_children_idx ON runq.runs (priority)
    WHERE status = 'waiting_for_children';
RESET statement_timeout;
RESET lock_timeout;
