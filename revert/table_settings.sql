-- Revert runq:table_settings from pg

BEGIN;

DROP TABLE runq.settings;

COMMIT;
