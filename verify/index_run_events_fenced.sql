-- Verify runq:index_run_events_fenced on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT i.indisunique AND i.indisvalid FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.run_events_fenced_key'::regclass);
END $$;

ROLLBACK;
