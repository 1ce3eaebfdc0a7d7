-- Verify runq:table_pause_settings on pg

BEGIN;

SELECT scope, key, reason, paused_at FROM runq.pause_settings WHERE false;

ROLLBACK;
