-- Deploy runq:index_runs_parked to pg
-- requires: column_runs_parked
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- The parked runs of each class, tenant by tenant: a claim that found fewer
-- runs than it asked for probes it (empty when nothing is parked), and
-- runq._swap_in steps from tenant to tenant of a class with one probe each,
-- however many runs a saturated tenant has parked.
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
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_parked_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_parked_idx ON runq.runs (priority, tenant_id, ready_at, run_id)
    WHERE status = 'queued' AND parked;
RESET statement_timeout;
RESET lock_timeout;
