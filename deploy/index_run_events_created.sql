-- Deploy runq:index_run_events_created to pg
-- requires: table_run_events
-- Locks: SHARE UPDATE EXCLUSIVE on runq.run_events for two scans of it; reads and writes go on.

-- The event log by time, for runq.throughput (a dashboard's last hour). BRIN,
-- not a B-tree: the log is appended in time order, so a block range's
-- summary is a narrow interval, and an insert into the unsummarised tail
-- writes nothing here (a B-tree would take an entry from every event of the
-- hot path). VACUUM summarises the ranges behind; an unsummarised range is
-- read whole, which for the tail is what a recent window wants anyway.
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
DROP INDEX CONCURRENTLY IF EXISTS runq.run_events_created_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_events_created_idx ON runq.run_events
    USING brin (created_at) WITH (pages_per_range = 32);
RESET statement_timeout;
RESET lock_timeout;
