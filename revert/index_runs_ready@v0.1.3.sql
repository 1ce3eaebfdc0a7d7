-- Revert runq:index_runs_ready from pg

BEGIN;

DROP INDEX runq.runs_ready_idx;

COMMIT;
