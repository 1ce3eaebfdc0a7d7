-- Revert runq:sequence_progress from pg

BEGIN;

DROP SEQUENCE runq.progress_seq;

COMMIT;
