-- Deploy runq:index_runs_list_kind to pg
-- requires: table_runs
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- runq.list_runs filtered by kind and status, newest first: one range of this
-- index per key, read backwards from before_run_id (docs/contract.md
-- "Observing the queue"). running runs take no entry: a claim writes none here, and
-- list_runs finds them through runs_held_idx, bounded by the workers' slots.
-- A submit and a finish each write one.
--
-- No BEGIN/COMMIT: CREATE INDEX CONCURRENTLY cannot run in a transaction.
-- What it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which submits, claims,
-- heartbeats and completes do not conflict with, for the whole build (two
-- scans of runs), and it waits for every transaction already open. Neither
-- wait blocks a writer, so no timeout: one would only leave an INVALID index
-- behind. A failed build leaves one too; this script drops such a leftover
-- first, so deploying again is the remedy.
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_list_kind_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_list_kind_idx ON runq.runs (kind, status, run_id)
    WHERE status <> 'running';
RESET statement_timeout;
RESET lock_timeout;
