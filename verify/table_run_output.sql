-- Verify runq:table_run_output on pg

BEGIN;

SELECT run_id, seq, epoch, created_at, chunk FROM runq.run_output WHERE false;

DO $$
BEGIN
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.conrelid = 'runq.run_output'::regclass AND c.conname = 'run_output_pkey'),
        'runq.run_output has no run_output_pkey';
END $$;

ROLLBACK;
