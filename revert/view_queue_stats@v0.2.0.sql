-- Revert runq:view_queue_stats from pg

BEGIN;

DROP VIEW runq.queue_stats;

COMMIT;
