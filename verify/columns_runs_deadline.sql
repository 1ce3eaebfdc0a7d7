-- Verify runq:columns_runs_deadline on pg

BEGIN;

SELECT timeout, deadline FROM runq.runs WHERE false;

DO $$
BEGIN
    ASSERT (SELECT a.atttypid = 'runq.duration'::regtype FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = 'runq.runs'::regclass AND a.attname = 'timeout'),
        'runq.runs.timeout is not of runq.duration';
END $$;

ROLLBACK;
