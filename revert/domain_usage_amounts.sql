-- Revert runq:domain_usage_amounts from pg

BEGIN;

DROP DOMAIN runq.usage_amounts;

COMMIT;
