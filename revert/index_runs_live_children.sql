-- Revert runq:index_runs_live_children from pg
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs until the index's users finish; reads and writes go on.

-- No BEGIN/COMMIT: DROP INDEX CONCURRENTLY cannot run in a transaction. What
-- it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which no writer conflicts
-- with; then it waits for the transactions using the index. It also drops an
-- INVALID index a failed deploy left.
SET lock_timeout = 0;
SET statement_timeout = 0;
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_live_children_idx;
RESET statement_timeout;
RESET lock_timeout;
