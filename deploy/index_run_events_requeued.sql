-- Deploy runq:index_run_events_requeued to pg
-- requires: table_run_events
-- Locks: SHARE UPDATE EXCLUSIVE on runq.run_events for two scans of it; reads and writes go on.

-- The run.requeued events of an expired lease (not of a release), counted
-- by runq.recovery_totals (a metrics scrape) from this index alone, as run_events_fenced_key serves the
-- run.fenced ones. Partial: only a requeue, off the hot path, writes here.
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
DROP INDEX CONCURRENTLY IF EXISTS runq.run_events_requeued_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_events_requeued_idx ON runq.run_events (run_id)
    WHERE type = 'run.requeued' AND payload ->> 'reason' = 'lease_expired';
RESET statement_timeout;
RESET lock_timeout;
