-- Revert runq:index_runs_ready from pg (back to index_runs_ready as v0.1.3 released it)
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- No BEGIN/COMMIT: CREATE INDEX CONCURRENTLY cannot run in a transaction.
-- What it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which submits, claims,
-- heartbeats and completes do not conflict with, for the whole build (two
-- scans of runs: minutes on 100 million runs), and it waits for every
-- transaction already open. Neither wait blocks a writer, so no timeout: one
-- would only leave an INVALID index behind. A failed build leaves one too;
-- this script drops such a leftover first, so reverting again is the remedy.
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_ready_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_ready_idx ON runq.runs (priority, ready_at, run_id)
    WHERE status = 'queued';
RESET statement_timeout;
RESET lock_timeout;
