-- Revert runq:index_runs_queue_expiry from pg

BEGIN;

DROP INDEX runq.runs_queue_expiry_idx;

COMMIT;
