-- Revert runq:domain_recovery_policy from pg

BEGIN;

DROP DOMAIN runq.recovery_policy;

COMMIT;
