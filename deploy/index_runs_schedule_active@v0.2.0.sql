-- Deploy runq:index_runs_schedule_active to pg
-- requires: column_runs_schedule
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- At most one non-terminal run per schedule, enforced by a constraint
-- (docs/contract.md "Schedules": the overlap guard), as runs_session_active_key
-- does for a session: runq.tick inserts a slot's run ON CONFLICT on this
-- index, so two ticks, or a tick and a redrive, can never give one schedule
-- two live runs, whatever the code above them does. waiting_for_user holds
-- the slot too. A run without a schedule takes no entry, so a queue that
-- uses no schedules pays nothing here.
--
-- No BEGIN/COMMIT: CREATE INDEX CONCURRENTLY cannot run in a transaction.
-- What it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which submits, claims,
-- heartbeats and completes do not conflict with, for the whole build (two
-- scans of runs), and it waits for every transaction already open. Neither
-- wait blocks a writer, so no timeout: one would only leave an INVALID index
-- behind. A failed build leaves one too (an INVALID unique index enforces
-- nothing); this script drops such a leftover first, so deploying again is
-- the remedy. The column is new, so no existing run can violate it.
SET lock_timeout = 0;
SET statement_timeout = 0;
SET client_min_messages = warning;  -- no NOTICE when there is no leftover
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_schedule_active_key;
RESET client_min_messages;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS runs_schedule_active_key ON runq.runs (schedule)
    WHERE schedule IS NOT NULL AND status IN ('queued', 'running', 'waiting_for_user');
RESET statement_timeout;
RESET lock_timeout;
