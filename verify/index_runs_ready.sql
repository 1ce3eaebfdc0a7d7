-- Verify runq:index_runs_ready on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT i.indisvalid FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_ready_idx'::regclass);
END $$;

ROLLBACK;
