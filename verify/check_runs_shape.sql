-- Verify runq:check_runs_shape on pg

BEGIN;

DO $$
BEGIN
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                    WHERE c.conrelid = 'runq.runs'::regclass AND c.contype = 'c'
                      AND c.conname = 'runs_shape_consistent'
                      AND pg_catalog.pg_get_constraintdef(c.oid) LIKE '%runq.consistent_run_shape%');
END $$;

ROLLBACK;
