-- Revert runq:index_runs_held from pg

BEGIN;

DROP INDEX runq.runs_held_idx;

COMMIT;
