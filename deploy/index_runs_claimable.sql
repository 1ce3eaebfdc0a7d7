-- Deploy runq:index_runs_claimable to pg
-- requires: column_runs_parked
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- What claim walks: runs_ready_idx without the parked runs. A run parked for
-- a limit or a pause has no entry here, so a saturated tenant's backlog of a
-- million runs costs a claim of another tenant nothing (with the parked runs
-- in the index, such a claim stepped over all of them: 400 ms, not 0.13 ms;
-- study/limits/RESULTS.md on branch wt-limits-study).
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
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_claimable_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_claimable_idx ON runq.runs (priority, ready_at, run_id)
    WHERE status = 'queued' AND NOT parked;
RESET statement_timeout;
RESET lock_timeout;
