-- Revert runq:table_checkpoints from pg

BEGIN;

DROP TABLE runq.checkpoints;

COMMIT;
