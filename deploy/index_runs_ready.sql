-- Deploy runq:index_runs_ready to pg
-- requires: function_claim
-- Locks: SHARE UPDATE EXCLUSIVE on runq.runs until the index's users finish; reads and writes go on.

-- runs_ready_idx is dropped. The claim reads runs_claimable_idx (the same,
-- without the parked runs), and nothing else needs this order; every submit,
-- requeue and hand-on would pay an entry here, and every claim leave one dead.
--
-- No BEGIN/COMMIT: DROP INDEX CONCURRENTLY cannot run in a transaction. What
-- it locks: SHARE UPDATE EXCLUSIVE on runq.runs, which no writer conflicts
-- with; then it waits for the transactions using the index. No timeout: the
-- wait blocks no writer.
SET lock_timeout = 0;
SET statement_timeout = 0;
DROP INDEX CONCURRENTLY IF EXISTS runq.runs_ready_idx;
RESET statement_timeout;
RESET lock_timeout;
