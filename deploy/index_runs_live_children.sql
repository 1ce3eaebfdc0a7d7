-- Deploy runq:index_runs_live_children to pg
-- requires: columns_runs_parent
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- The children that are not terminal, by parent: whether a parent waiting
-- for its children has any left (runq.wait_children, runq._wake_parents),
-- and which to cancel when it ends (runq._cancel_children). A run without a
-- parent takes no entry, so a queue that spawns nothing pays nothing here;
-- a child pays an entry when it is spawned and one per claim.
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
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_live_children_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_live_children_idx ON runq.runs (parent_run_id, run_id)
    WHERE parent_run_id IS NOT NULL
      AND status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children');
RESET statement_timeout;
RESET lock_timeout;
