-- Verify runq:view_limits on pg

BEGIN;

SELECT scope, key, max_running, running FROM runq.limits WHERE false;

DO $$
BEGIN
    ASSERT pg_catalog.has_table_privilege('runq_admin', 'runq.limits', 'SELECT');
    ASSERT NOT pg_catalog.has_table_privilege('runq_worker', 'runq.limits', 'SELECT');
    ASSERT NOT pg_catalog.has_table_privilege('runq_client', 'runq.limits', 'SELECT');
END $$;

ROLLBACK;
