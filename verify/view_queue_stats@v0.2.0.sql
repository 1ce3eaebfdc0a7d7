-- Verify runq:view_queue_stats on pg

BEGIN;

SELECT priority, ready, scheduled, running, waiting_for_user, failed, oldest_ready_age
  FROM runq.queue_stats
 WHERE false;

DO $$
BEGIN
    ASSERT pg_catalog.has_table_privilege('runq_admin', 'runq.queue_stats', 'SELECT');
    ASSERT NOT pg_catalog.has_table_privilege('runq_worker', 'runq.queue_stats', 'SELECT');
    ASSERT NOT pg_catalog.has_table_privilege('runq_client', 'runq.queue_stats', 'SELECT');
END $$;

ROLLBACK;
