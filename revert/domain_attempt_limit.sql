-- Revert runq:domain_attempt_limit from pg

BEGIN;

DROP DOMAIN runq.attempt_limit;

COMMIT;
