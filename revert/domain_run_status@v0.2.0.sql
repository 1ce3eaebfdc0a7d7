-- Revert runq:domain_run_status from pg

BEGIN;

DROP DOMAIN runq.run_status;

COMMIT;
