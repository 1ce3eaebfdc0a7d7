-- Verify runq:columns_runs_usage on pg

BEGIN;

SELECT usage, budget FROM runq.runs WHERE false;

DO $$
BEGIN
    ASSERT (SELECT a.attnotnull FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = 'runq.runs'::regclass AND a.attname = 'usage'),
        'runq.runs.usage may be NULL';
END $$;

ROLLBACK;
