-- Verify runq:grants_runq_worker_reads on pg
--
-- runq_worker's reads (verify/lib/function.sql leaves this role out of the
-- check of these two functions, so that every version's verify holds before
-- this change and after it).

\ir lib/begin.sql
DO $$
BEGIN
    ASSERT pg_catalog.has_function_privilege('runq_worker', 'runq.get_run(bigint)', 'EXECUTE'),
        'runq_worker may not EXECUTE runq.get_run(bigint)';
    ASSERT pg_catalog.has_function_privilege('runq_worker', 'runq.run_events(bigint)', 'EXECUTE'),
        'runq_worker may not EXECUTE runq.run_events(bigint)';
END $$;
ROLLBACK;
