-- Verify runq:function__checkpoint_state on pg

BEGIN;

DO $$
DECLARE
    f regprocedure := 'runq._checkpoint_state(bigint, bigint)';
BEGIN
    ASSERT (SELECT p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'] AND p.provolatile = 'v'
              FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT NOT pg_catalog.has_function_privilege('runq_client', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('runq_worker', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('runq_admin', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE');
    ASSERT obj_description(f, 'pg_proc') IS NOT NULL;
END $$;

ROLLBACK;
