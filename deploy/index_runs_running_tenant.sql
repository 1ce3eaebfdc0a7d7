-- Deploy runq:index_runs_running_tenant to pg
-- requires: table_runs
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- A tenant's running runs, which its limit counts: as small as the number
-- of runs running, so the entry each claim writes here is cheap (in an index
-- of every queued run it cost a claim a descent of a big tree). lease is
-- never NULL while running (runs_leased_iff_running), but a fenced write's
-- WHERE (run_id, status = 'running') does not imply it, so no such write can
-- take this index for the primary key when the statistics are stale (a scan
-- of every running run: tests/pgtap/21_write_plan.sql). Not lease_expires_at,
-- which a heartbeat changes: a column of a predicate makes updates of it not HOT.
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
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_running_tenant_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_running_tenant_idx ON runq.runs (tenant_id)
    WHERE status = 'running' AND lease IS NOT NULL;
RESET statement_timeout;
RESET lock_timeout;
