-- Revert runq:type_completed_and_claimed from pg

BEGIN;

DROP TYPE runq.completed_and_claimed;

COMMIT;
