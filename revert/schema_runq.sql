-- Revert runq:schema_runq from pg

BEGIN;

DROP SCHEMA runq;

COMMIT;
