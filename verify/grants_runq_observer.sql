-- Verify runq:grants_runq_observer on pg
--
-- runq_observer's grants as one set (verify/lib/function.sql leaves this role
-- out of each function's check): what it was granted here, and, whatever
-- later changes grant it, that it can change nothing.

\ir lib/begin.sql
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['runq.get_run(bigint)', 'runq.run_events(bigint)',
                             'runq.tool_calls(bigint)', 'runq.dead_letter(integer)',
                             'runq.orphan_report(interval)',
                             'runq.usage_report(timestamptz, timestamptz)'] LOOP
        ASSERT pg_catalog.has_function_privilege('runq_observer', f, 'EXECUTE'),
            format('runq_observer may not EXECUTE %s', f);
    END LOOP;
    ASSERT (SELECT bool_and(pg_catalog.has_table_privilege('runq_observer', v, 'SELECT'))
              FROM unnest(ARRAY['runq.queue_stats', 'runq.limits', 'runq.pauses',
                                'runq.schedules']) AS v),
        'runq_observer may not SELECT one of queue_stats, limits, pauses, schedules';
    -- Read-only: every function of runq it may run is STABLE or IMMUTABLE
    -- (PostgreSQL refuses a write inside those), it may only SELECT, and only
    -- from views.
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_proc AS p
                        WHERE p.pronamespace = 'runq'::regnamespace AND p.provolatile = 'v'
                          AND pg_catalog.has_function_privilege('runq_observer', p.oid, 'EXECUTE')),
        'runq_observer may EXECUTE a VOLATILE function of runq';
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_class AS c
                        CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
                                                'REFERENCES', 'TRIGGER']) AS p(privilege)
                        WHERE c.relnamespace = 'runq'::regnamespace
                          AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
                          AND (c.relkind <> 'v' OR p.privilege <> 'SELECT')
                          AND pg_catalog.has_table_privilege('runq_observer', c.oid, p.privilege)),
        'runq_observer holds a privilege on a table of runq, or more than SELECT on a view';
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_class AS c
                        WHERE c.relnamespace = 'runq'::regnamespace
                          -- CASE: the planner may test a condition before the relkind.
                          AND CASE WHEN c.relkind = 'S'
                                   THEN pg_catalog.has_sequence_privilege('runq_observer', c.oid,
                                                                          'USAGE, UPDATE')
                              END),
        'runq_observer may use a sequence of runq';
END $$;
ROLLBACK;
