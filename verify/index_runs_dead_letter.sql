-- Verify runq:index_runs_dead_letter on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT i.indisvalid FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_dead_letter_idx'::regclass);
END $$;

ROLLBACK;
