-- Deploy runq:index_runs_queued_tenant to pg
-- requires: column_runs_parked
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- A tenant's queued runs: (false, tenant) the admitted ones its limit counts
-- (the claim may take them at any time), (true, tenant) the parked ones in
-- claim order, the next to admit first; and, leading with parked, the
-- tenants that have parked runs, one probe each. A submit and a requeue
-- write an entry here, a claim none.
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
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_queued_tenant_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_queued_tenant_idx ON runq.runs (parked, tenant_id, priority, ready_at, run_id)
    WHERE status = 'queued';
RESET statement_timeout;
RESET lock_timeout;
