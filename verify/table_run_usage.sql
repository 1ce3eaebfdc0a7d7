-- Verify runq:table_run_usage on pg

BEGIN;

SELECT run_id, usage FROM runq.run_usage WHERE false;

-- record_usage names the key in ON CONFLICT; a purge relies on the cascade.
DO $$
BEGIN
    ASSERT (SELECT c.confdeltype FROM pg_catalog.pg_constraint AS c
             WHERE c.conrelid = 'runq.run_usage'::regclass AND c.contype = 'f') = 'c',
        'runq.run_usage has no ON DELETE CASCADE foreign key to runs';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.conrelid = 'runq.run_usage'::regclass AND c.conname = 'run_usage_pkey'),
        'runq.run_usage has no run_usage_pkey';
END $$;

ROLLBACK;
