-- Verify runq:function_claim on pg

BEGIN;

DO $$
DECLARE
    f regprocedure := 'runq.claim(integer[], text, interval, integer, text[])';
BEGIN
    ASSERT (SELECT p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp']
              FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT (SELECT p.prosecdef FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT pg_catalog.has_function_privilege('runq_worker', f, 'EXECUTE');
    ASSERT pg_catalog.has_function_privilege('runq_admin', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('runq_client', f, 'EXECUTE');
    ASSERT NOT pg_catalog.has_function_privilege('public', f, 'EXECUTE');
    ASSERT obj_description(f, 'pg_proc') IS NOT NULL;
    -- The claim of v0.2, which filters by kind, and only that one.
    ASSERT (SELECT p.prosrc LIKE '%r.kind = kd.kind%' FROM pg_catalog.pg_proc AS p WHERE p.oid = f);
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_proc AS p
                        WHERE p.proname = 'claim' AND p.pronamespace = 'runq'::regnamespace
                          AND p.oid <> f);
END $$;

ROLLBACK;
