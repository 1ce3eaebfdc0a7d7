-- Revert runq:table_runs from pg

BEGIN;

DROP TABLE runq.runs;

COMMIT;
