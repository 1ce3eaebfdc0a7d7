-- Revert runq:wake_idle from pg

BEGIN;

DROP FUNCTION runq._wake_idle();
DROP FUNCTION runq._mark_idle();
DROP FUNCTION runq._wake_lock();
DROP SEQUENCE runq.idle_mark;

COMMIT;
