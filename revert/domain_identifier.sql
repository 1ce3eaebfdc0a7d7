-- Revert runq:domain_identifier from pg

BEGIN;

DROP DOMAIN runq.identifier;

COMMIT;
