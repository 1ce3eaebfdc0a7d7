-- Verify runq:view_schedules on pg

\ir lib/begin.sql

SELECT name, tenant_id, kind, cron, every, timezone, next_slot, last_slot, last_run_id, paused
  FROM runq.schedules WHERE false;

DO $$
BEGIN
    ASSERT pg_catalog.has_table_privilege('runq_admin', 'runq.schedules', 'SELECT'),
        'runq_admin cannot read runq.schedules';
    ASSERT NOT pg_catalog.has_table_privilege('runq_worker', 'runq.schedules', 'SELECT'),
        'runq_worker may read runq.schedules';
    ASSERT NOT pg_catalog.has_table_privilege('runq_client', 'runq.schedules', 'SELECT'),
        'runq_client may read runq.schedules';
    ASSERT NOT pg_catalog.has_table_privilege('public', 'runq.schedules', 'SELECT'),
        'PUBLIC may read runq.schedules';
END $$;

ROLLBACK;
