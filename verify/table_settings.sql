-- Verify runq:table_settings on pg

BEGIN;

SELECT singleton, lease, backoff_base, backoff_cap, stale_after
  FROM runq.settings
 WHERE false;

DO $$
BEGIN
    ASSERT (SELECT count(*) FROM runq.settings) = 1;
END $$;

ROLLBACK;
