-- Verify runq:view_pauses on pg

BEGIN;

SELECT scope, key, reason, paused_at FROM runq.pauses WHERE false;

DO $$
BEGIN
    ASSERT pg_catalog.has_table_privilege('runq_admin', 'runq.pauses', 'SELECT');
    ASSERT NOT pg_catalog.has_table_privilege('runq_worker', 'runq.pauses', 'SELECT');
    ASSERT NOT pg_catalog.has_table_privilege('runq_client', 'runq.pauses', 'SELECT');
END $$;

ROLLBACK;
