-- Revert runq:domain_counter from pg

BEGIN;

DROP DOMAIN runq.counter;

COMMIT;
