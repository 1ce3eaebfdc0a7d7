-- Revert runq:domain_event_type from pg

BEGIN;

DROP DOMAIN runq.event_type;

COMMIT;
