-- Deploy runq:index_runs_deadline to pg
-- requires: index_runs_deadline@v0.2.0
-- requires: domain_run_status
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it and for the swap; reads and writes go on.

-- The queued and waiting runs that have a deadline, soonest first, now with
-- the runs that wait for their children (runq.wait_children): the sweep
-- fails those past their deadline as it fails a run waiting for its user.
-- Running runs still take no entry.
--
-- Built beside the old index under a new name, then swapped in: the old one
-- answers (and serves) until the new one is valid.
-- No BEGIN/COMMIT: CREATE and DROP INDEX CONCURRENTLY cannot run in a
-- transaction. What it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which
-- submits, claims, heartbeats and completes do not conflict with, for the
-- whole build (two scans of runs: minutes on 100 million runs), and it waits
-- for every transaction already open; the rename takes the same lock. No
-- timeout: one would only leave an INVALID index behind. A failed build
-- leaves one; this script drops such a leftover first, so deploying again is
-- the remedy (if it failed after dropping the old index, rename the new one
-- instead: ALTER INDEX runq.runs_deadline_idx_new RENAME TO runs_deadline_idx).
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_deadline_idx_new;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_deadline_idx_new ON runq.runs (deadline)
    WHERE deadline IS NOT NULL
      AND status IN ('queued', 'waiting_for_user', 'waiting_for_children');
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_deadline_idx;
-- The new index takes the old one's name, which no client uses: only the
-- DBA's scripts and the tests name indexes.
-- squawk-ignore renaming-object
ALTER INDEX runq.runs_deadline_idx_new RENAME TO runs_deadline_idx;
RESET statement_timeout;
RESET lock_timeout;
