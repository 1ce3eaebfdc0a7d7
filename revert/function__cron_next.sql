-- Revert runq:function__cron_next from pg

BEGIN;

DROP FUNCTION runq._cron_next(text, text, timestamptz);
DROP FUNCTION runq._cron_walk(bigint[], text, timestamptz);
DROP FUNCTION runq._next_bit(bigint, integer);
DROP FUNCTION runq._check_timezone(text, text);
DROP FUNCTION runq._check_cron(text, text);
DROP FUNCTION runq._cron_fields(text, text);

COMMIT;
