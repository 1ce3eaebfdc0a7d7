-- Verify runq:table_schedule_settings on pg

\ir lib/begin.sql

SELECT name, tenant_id, kind, cron, cron_fields, every, timezone, payload, priority, max_attempts,
       recovery_policy, queue_ttl, timeout, created_at, next_slot, last_slot, last_run_id
  FROM runq.schedule_settings WHERE false;

DO $$
BEGIN
    -- exactly one of cron and every: both and neither are refused
    ASSERT (SELECT pg_catalog.pg_get_constraintdef(c.oid) = 'CHECK (((cron IS NULL) <> (every IS NULL)))'
              FROM pg_catalog.pg_constraint AS c
             WHERE c.conrelid = 'runq.schedule_settings'::regclass
               AND c.conname = 'schedule_settings_cron_or_every'),
        'schedule_settings: the CHECK that exactly one of cron and every is given is missing';
    ASSERT (SELECT pg_catalog.pg_get_constraintdef(c.oid) = 'CHECK (((cron IS NULL) = (cron_fields IS NULL)))'
              FROM pg_catalog.pg_constraint AS c
             WHERE c.conrelid = 'runq.schedule_settings'::regclass
               AND c.conname = 'schedule_settings_cron_parsed'),
        'schedule_settings: the CHECK that a cron is kept parsed is missing';
    ASSERT (SELECT pg_catalog.array_agg(a.attname::text ORDER BY k.n)
              FROM pg_catalog.pg_index AS i
             CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, n)
              JOIN pg_catalog.pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE i.indexrelid = 'runq.schedule_settings_due_idx'::regclass) = ARRAY['next_slot', 'name'],
        'schedule_settings_due_idx is not on (next_slot, name)';
    ASSERT NOT EXISTS (SELECT FROM unnest(ARRAY['runq_client', 'runq_worker', 'runq_admin', 'public']) AS r
                        WHERE pg_catalog.has_table_privilege(r, 'runq.schedule_settings',
                                                             'SELECT, INSERT, UPDATE, DELETE')),
        'a role may read or write runq.schedule_settings directly';
END $$;

ROLLBACK;

\set index runq.schedule_settings_due_idx
\ir lib/index.sql
