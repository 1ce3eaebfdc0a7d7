-- Revert runq:domain_duration from pg

BEGIN;

DROP DOMAIN runq.duration;

COMMIT;
