-- Deploy runq:index_runs_deadline to pg
-- requires: columns_runs_deadline
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs for two scans of it; reads and writes go on.

-- The queued and waiting runs that have a deadline, soonest first: the
-- sweep reads its head (nothing due: one probe, however many runs have
-- deadlines). A run without a timeout has no entry, so a queue that sets none
-- pays nothing here; a run with one pays an entry when it is queued and when
-- it waits for its user. Running runs have none, so neither a claim nor a
-- complete writes one: the sweep finds those past their deadline among the
-- running runs (runs_held_idx), which are as many as the workers hold, in
-- the walk it makes for expired leases.
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
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_deadline_idx;
RESET client_min_messages;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_deadline_idx ON runq.runs (deadline)
    WHERE deadline IS NOT NULL AND status IN ('queued', 'waiting_for_user');
RESET statement_timeout;
RESET lock_timeout;
