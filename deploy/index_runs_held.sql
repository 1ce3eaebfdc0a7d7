-- Deploy runq:index_runs_held to pg
-- requires: index_runs_held@v0.2.0
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it and for the swap; reads and writes go on.

-- Runs that hold a worker, or wait: for their user, or now for their
-- children (runq.wait_children). queue_stats counts each status from it, and
-- reverting the status reads it to find none is left. A run waiting for its
-- children is written here once, when it starts to wait: an index of its own
-- would cost every claim and complete of every run one more relation to open
-- and one more predicate to test. The sweep's walk of the running runs steps
-- over the waiting ones, as it did over those waiting for their user.
--
-- Built beside the old index under a new name, then swapped in: the old one
-- serves until the new one is valid.
-- No BEGIN/COMMIT: CREATE and DROP INDEX CONCURRENTLY cannot run in a
-- transaction. What it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which
-- submits, claims, heartbeats and completes do not conflict with, for the
-- whole build (two scans of runs: minutes on 100 million runs), and it waits
-- for every transaction already open; the rename takes the same lock. No
-- timeout: one would only leave an INVALID index behind. A failed build
-- leaves one; this script drops such a leftover first, so deploying again is
-- the remedy.
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_held_idx_new;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_held_idx_new ON runq.runs (run_id)
    WHERE status IN ('running', 'waiting_for_user', 'waiting_for_children');
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_held_idx;
-- The new index takes the old one's name, which no client uses: only the
-- DBA's scripts and the tests name indexes.
-- squawk-ignore renaming-object
ALTER INDEX runq.runs_held_idx_new RENAME TO runs_held_idx;
RESET statement_timeout;
RESET lock_timeout;
