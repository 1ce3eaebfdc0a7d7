-- Verify runq:argument_checks on pg

BEGIN;

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOREACH f IN ARRAY ARRAY['runq._check_identifier(text, text, boolean)', 'runq._check_count(text, integer)',
                             'runq._check_duration(text, interval)', 'runq._check_object(text, jsonb)', 'runq._check_jsonb(text, jsonb)',
                             'runq._check_choice(text, text, text)',
                             'runq._check_classes(text, integer[])', 'runq._check_names(text, text[])',
                             'runq._first_bad_class(integer[])', 'runq._is_count(integer)', 'runq._is_duration(interval)',
                             'runq._is_classes(integer[])', 'runq._is_names(text[])']::regprocedure[] LOOP
        -- A SQL-standard body, so that no search_path reaches it, and IMMUTABLE, so that
        -- the planner inlines it and PL/pgSQL takes no snapshot to run it.
        ASSERT (SELECT p.prosqlbody IS NOT NULL AND NOT p.prosecdef AND p.proconfig IS NULL
                       AND p.provolatile = 'i'
                  FROM pg_catalog.pg_proc AS p WHERE p.oid = f), f::text;
    END LOOP;
    FOREACH f IN ARRAY ARRAY['runq._bad_argument(text, text, anyelement)',
                             'runq._run_not_found(bigint)']::regprocedure[] LOOP
        ASSERT (SELECT p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'] AND NOT p.prosecdef
                  FROM pg_catalog.pg_proc AS p WHERE p.oid = f), f::text;
    END LOOP;
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace = 'runq'::regnamespace
                AND p.proname IN ('_bad_argument', '_check_identifier', '_check_count', '_check_duration',
                                  '_check_object', '_check_jsonb', '_check_choice', '_check_classes', '_check_names', '_first_bad_class',
                                  '_is_count', '_is_duration', '_is_classes', '_is_names',
                                  '_run_not_found') LOOP
        ASSERT NOT pg_catalog.has_function_privilege('runq_client', f, 'EXECUTE'), f::text;
        ASSERT NOT pg_catalog.has_function_privilege('runq_worker', f, 'EXECUTE'), f::text;
        ASSERT NOT pg_catalog.has_function_privilege('runq_admin', f, 'EXECUTE'), f::text;
        ASSERT NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE'), f::text;
        ASSERT obj_description(f, 'pg_proc') IS NOT NULL, f::text;
    END LOOP;
    ASSERT runq._check_count('max_runs', 1);
END $$;

ROLLBACK;
