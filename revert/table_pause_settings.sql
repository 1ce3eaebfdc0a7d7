-- Revert runq:table_pause_settings from pg
-- Locks: ACCESS EXCLUSIVE on runq.pause_settings, a table of a few rows, to drop it.

BEGIN;

DROP TABLE runq.pause_settings;

COMMIT;
