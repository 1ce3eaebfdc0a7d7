-- Revert runq:domain_priority_class from pg

BEGIN;

DROP DOMAIN runq.priority_class;

COMMIT;
