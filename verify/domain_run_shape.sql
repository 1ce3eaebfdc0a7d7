-- Verify runq:domain_run_shape on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT t.typtype = 'd' AND t.typbasetype = 'runq.run_shape'::regtype
              FROM pg_catalog.pg_type AS t
             WHERE t.oid = 'runq.consistent_run_shape'::regtype);
    ASSERT (SELECT count(*) FROM pg_catalog.pg_constraint AS c
             WHERE c.contypid = 'runq.consistent_run_shape'::regtype AND c.contype = 'c') = 5;
    -- It refuses what it must: a running run without a lease.
    BEGIN
        PERFORM ROW('running', false, false, false, false, false, false, false)::runq.run_shape
                   ::runq.consistent_run_shape;
        RAISE EXCEPTION 'runq.consistent_run_shape accepted a running run without a lease';
    EXCEPTION WHEN check_violation THEN
        NULL;
    END;
END $$;

ROLLBACK;
