-- Verify runq:schema_runq on pg

BEGIN;

DO $$
BEGIN
    ASSERT (SELECT pg_catalog.has_schema_privilege('runq', 'USAGE'));
    ASSERT NOT pg_catalog.has_schema_privilege('public', 'runq', 'CREATE');
END $$;

ROLLBACK;
