-- Revert runq:type_run_info from pg

BEGIN;

DROP TYPE runq.run_info;

COMMIT;
