-- Revert runq:domain_json_object from pg

BEGIN;

DROP DOMAIN runq.json_object;

COMMIT;
