-- Revert runq:index_runs_dead_letter from pg

BEGIN;

DROP INDEX runq.runs_dead_letter_idx;

COMMIT;
