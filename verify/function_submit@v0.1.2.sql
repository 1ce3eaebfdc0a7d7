-- Verify runq:function_submit on pg

BEGIN;

DO $$
DECLARE
    f regprocedure := 'runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval)';
BEGIN
    ASSERT (SELECT p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp']
              FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT (SELECT p.prosecdef FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT pg_catalog.has_function_privilege('runq_client', f, 'EXECUTE');
    ASSERT pg_catalog.has_function_privilege('runq_admin', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('runq_worker', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE');
    ASSERT obj_description(f, 'pg_proc') IS NOT NULL;
    -- The reworked submit, not v0.1.0's: it takes a purged key again.
    ASSERT (SELECT p.prosrc LIKE '%EXIT WHEN FOUND%' FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
END $$;

ROLLBACK;
