-- Verify runq:index_runs_held on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT i.indisvalid FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_held_idx'::regclass);
END $$;

ROLLBACK;
