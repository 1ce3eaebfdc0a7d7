-- Verify runq:function_ask_user on pg

BEGIN;

DO $$
DECLARE
    f regprocedure := 'runq.ask_user(bigint, bigint, jsonb)';
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

-- This version checks its arguments with the shared checks of argument_checks.
DO $$
BEGIN
    ASSERT (SELECT p.prosrc LIKE '%runq._check_jsonb(%' FROM pg_catalog.pg_proc AS p
             WHERE p.oid = 'runq.ask_user(bigint, bigint, jsonb)'::regprocedure);
END $$;

ROLLBACK;
