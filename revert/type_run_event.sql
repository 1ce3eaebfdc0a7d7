-- Revert runq:type_run_event from pg

BEGIN;

DROP TYPE runq.run_event;

COMMIT;
