-- Verify runq:role_runq_admin on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT NOT r.rolcanlogin FROM pg_catalog.pg_roles AS r WHERE r.rolname = 'runq_admin');
    ASSERT pg_catalog.has_schema_privilege('runq_admin', 'runq', 'USAGE');
END $$;

ROLLBACK;
