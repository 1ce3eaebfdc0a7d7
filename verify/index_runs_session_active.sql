-- Verify runq:index_runs_session_active on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT i.indisunique AND i.indisvalid FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_session_active_key'::regclass);
END $$;

ROLLBACK;
