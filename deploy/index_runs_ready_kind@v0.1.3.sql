-- Deploy runq:index_runs_ready_kind to pg
-- requires: table_runs

-- A claim that names its kinds (claim's kinds argument) walks this index once
-- per class and kind it asks for, oldest ready first, so it never reads the
-- queued runs of kinds it did not ask for. Partial, like runs_ready_idx: a
-- submit and a requeue write an entry, a claim's or complete's update none.
--
-- No BEGIN/COMMIT: CREATE INDEX CONCURRENTLY cannot run in a transaction.
-- What it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which submits, claims,
-- heartbeats and completes do not conflict with (only DDL, VACUUM and ANALYZE
-- do), for the whole build: two scans of runs, minutes on 100 million runs.
-- It also waits for every transaction already open to finish. Neither wait
-- blocks a writer, so there is no lock timeout to keep short and no statement
-- timeout to fit: a timeout would only leave an INVALID index behind.
-- A build that failed for another reason leaves an INVALID index too; this
-- script drops such a leftover first, so deploying again is the remedy.
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_ready_kind_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_ready_kind_idx ON runq.runs (priority, kind, ready_at, run_id)
    WHERE status = 'queued';
RESET statement_timeout;
RESET lock_timeout;
