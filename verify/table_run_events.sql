-- Verify runq:table_run_events on pg

BEGIN;

SELECT run_id, event_id, epoch, created_at, type, payload
  FROM runq.run_events
 WHERE false;

ROLLBACK;
