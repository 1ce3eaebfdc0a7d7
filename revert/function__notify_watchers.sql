-- Revert runq:function__notify_watchers from pg

BEGIN;

DROP FUNCTION runq._notify_watchers(bigint[]);

COMMIT;
