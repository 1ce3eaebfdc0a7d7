-- Verify runq:column_runs_parked on pg

BEGIN;

SELECT parked FROM runq.runs WHERE false;

DO $$
BEGIN
    ASSERT (SELECT a.attnotnull FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = 'runq.runs'::regclass AND a.attname = 'parked'),
        'runq.runs.parked may be NULL';
END $$;

ROLLBACK;
