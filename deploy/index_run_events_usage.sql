-- Deploy runq:index_run_events_usage to pg
-- requires: table_run_events
-- Locks: SHARE UPDATE EXCLUSIVE on runq.run_events for two scans of it; reads and writes go on.

-- The usage ledger by time: runq.usage_report reads the run.usage events of
-- a window from here, however long the log. Partial, so every other event
-- pays only the predicate.
--
-- No BEGIN/COMMIT: CREATE INDEX CONCURRENTLY cannot run in a transaction.
-- What it locks: SHARE UPDATE EXCLUSIVE on runq.run_events, which no writer
-- conflicts with, for the whole build (two scans of the event log), and it
-- waits for every transaction already open. Neither wait blocks a writer, so
-- no timeout: one would only leave an INVALID index behind. A failed build
-- leaves one too; this script drops such a leftover first, so deploying
-- again is the remedy.
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.run_events_usage_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_events_usage_idx ON runq.run_events (created_at, run_id)
    WHERE type = 'run.usage';
RESET statement_timeout;
RESET lock_timeout;
