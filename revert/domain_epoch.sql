-- Revert runq:domain_epoch from pg

BEGIN;

DROP DOMAIN runq.epoch;

COMMIT;
