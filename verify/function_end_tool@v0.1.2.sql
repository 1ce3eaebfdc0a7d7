-- Verify runq:function_end_tool on pg

BEGIN;

DO $$
DECLARE
    f regprocedure := 'runq.end_tool(bigint, bigint, text, jsonb)';
BEGIN
    ASSERT (SELECT p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp']
              FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT (SELECT p.prosecdef FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT pg_catalog.has_function_privilege('runq_worker', f, 'EXECUTE');
    ASSERT pg_catalog.has_function_privilege('runq_admin', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('runq_client', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE');
    ASSERT obj_description(f, 'pg_proc') IS NOT NULL;
END $$;

ROLLBACK;
