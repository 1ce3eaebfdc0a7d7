-- Verify runq:table_watches on pg

BEGIN;

SELECT run_id, pid, backend_start FROM runq.watches WHERE false;

DO $$
BEGIN
    ASSERT (SELECT c.confdeltype FROM pg_catalog.pg_constraint AS c
             WHERE c.conrelid = 'runq.watches'::regclass AND c.contype = 'f') = 'c',
        'runq.watches has no ON DELETE CASCADE foreign key to runs';
END $$;

ROLLBACK;
