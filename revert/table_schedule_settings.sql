-- Revert runq:table_schedule_settings from pg
-- Locks: ACCESS EXCLUSIVE on runq.schedule_settings, a table of one row per schedule, to drop it, waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP TABLE runq.schedule_settings;

COMMIT;
