-- Verify runq:index_runs_ready_kind on pg

BEGIN;

DO $$
BEGIN
    -- A concurrent build that failed leaves the index INVALID: that fails too.
    ASSERT (SELECT i.indisvalid AND i.indisready FROM pg_catalog.pg_index AS i
             WHERE i.indexrelid = 'runq.runs_ready_kind_idx'::regclass);
END $$;

ROLLBACK;
