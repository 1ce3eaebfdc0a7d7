-- Revert runq:view_schedules from pg

BEGIN;

DROP VIEW runq.schedules;

COMMIT;
