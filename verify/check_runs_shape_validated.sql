-- Verify runq:check_runs_shape_validated on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT c.convalidated FROM pg_catalog.pg_constraint AS c
             WHERE c.conrelid = 'runq.runs'::regclass AND c.conname = 'runs_shape_consistent');
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                        WHERE c.conrelid = 'runq.runs'::regclass AND c.contype = 'c'
                          AND c.conname <> 'runs_shape_consistent');
END $$;

ROLLBACK;
