-- Revert runq:domain_failure_record from pg

BEGIN;

DROP DOMAIN runq.failure_record;

COMMIT;
