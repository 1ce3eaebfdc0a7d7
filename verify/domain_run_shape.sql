-- Verify runq:domain_run_shape on pg

\set domain runq.consistent_run_shape
\set base runq.run_shape
\ir lib/domain.sql

DO $$
BEGIN
    -- The five invariants, one CHECK each.
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
