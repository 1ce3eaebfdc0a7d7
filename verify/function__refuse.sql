-- Verify runq:function__refuse on pg

BEGIN;

DO $$
DECLARE
    f regprocedure := 'runq._refuse(bigint, bigint, text, boolean)';
BEGIN
    ASSERT (SELECT p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp']
              FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT NOT pg_catalog.has_function_privilege('runq_client', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('runq_worker', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('runq_admin', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE');
    ASSERT obj_description(f, 'pg_proc') IS NOT NULL;
    -- The rework that answers epochs the run never had.
    ASSERT (SELECT p.prosrc LIKE '%NOT BETWEEN 0 AND v_epoch%' FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
END $$;

-- This version checks its arguments with the shared checks of argument_checks.
DO $$
BEGIN
    ASSERT (SELECT p.prosrc LIKE '%runq._run_not_found(%' FROM pg_catalog.pg_proc AS p
             WHERE p.oid = 'runq._refuse(bigint, bigint, text, boolean)'::regprocedure);
END $$;

ROLLBACK;
