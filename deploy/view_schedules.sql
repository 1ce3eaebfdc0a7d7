-- Deploy runq:view_schedules to pg
-- requires: table_schedule_settings
-- requires: table_pause_settings
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- paused: one probe of pause_settings' primary key per schedule.
-- SELECT for runq_admin; runq_observer's grant comes later in the plan, with
-- that role (grants_runq_observer).
CREATE VIEW runq.schedules AS
SELECT s.name::text AS name, s.tenant_id::text AS tenant_id, s.kind::text AS kind,
       s.cron, s.every::interval AS every, s.timezone, s.next_slot, s.last_slot, s.last_run_id,
       EXISTS (SELECT FROM runq.pause_settings AS p
                WHERE p.scope = 'schedule' AND p.key = s.name) AS paused
  FROM runq.schedule_settings AS s;

GRANT SELECT ON runq.schedules TO runq_admin;

COMMENT ON VIEW runq.schedules IS
    'The schedules: their timing, next slot, newest slot handled, newest run created, and whether a pause (scope schedule) holds them.';

COMMIT;
