-- Verify runq:index_runs_ready_kind on pg (the index is dropped)

\ir lib/begin.sql
SET LOCAL verify.index = 'runq.runs_ready_kind_idx';

DO $$
BEGIN
    ASSERT to_regclass(current_setting('verify.index')) IS NULL,
        format('%s still exists', current_setting('verify.index'));
END $$;

ROLLBACK;
