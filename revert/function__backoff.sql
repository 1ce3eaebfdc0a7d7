-- Revert runq:function__backoff from pg

BEGIN;

DROP FUNCTION runq._backoff(integer);

COMMIT;
