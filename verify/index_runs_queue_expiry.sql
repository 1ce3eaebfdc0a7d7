-- Verify runq:index_runs_queue_expiry on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT i.indisvalid FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_queue_expiry_idx'::regclass);
END $$;

ROLLBACK;
