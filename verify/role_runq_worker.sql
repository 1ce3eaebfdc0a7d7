-- Verify runq:role_runq_worker on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT NOT r.rolcanlogin FROM pg_catalog.pg_roles AS r WHERE r.rolname = 'runq_worker');
    ASSERT pg_catalog.has_schema_privilege('runq_worker', 'runq', 'USAGE');
END $$;

ROLLBACK;
