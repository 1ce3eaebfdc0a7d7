-- Verify runq:role_runq_client on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT NOT r.rolcanlogin FROM pg_catalog.pg_roles AS r WHERE r.rolname = 'runq_client');
    ASSERT pg_catalog.has_schema_privilege('runq_client', 'runq', 'USAGE');
END $$;

ROLLBACK;
