-- Revert runq:index_runs_ready_kind from pg

-- No BEGIN/COMMIT: DROP INDEX CONCURRENTLY cannot run in a transaction. What
-- it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which no writer conflicts
-- with, then it waits for the transactions using the index. It also drops an
-- INVALID index a failed deploy left. claim's revert runs first (the plan's
-- order): only a claim with kinds uses this index.
SET lock_timeout = 0;
SET statement_timeout = 0;
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_ready_kind_idx;
RESET statement_timeout;
RESET lock_timeout;
