-- Revert runq:function__schedule_slots from pg

BEGIN;

DROP FUNCTION runq._schedule_due(bigint[], text, interval, timestamptz, timestamptz, timestamptz);
DROP FUNCTION runq._schedule_after(bigint[], text, interval, timestamptz, timestamptz);
DROP FUNCTION runq._every_k(timestamptz, interval, timestamptz);
DROP FUNCTION runq._every_slot(timestamptz, interval, bigint);

COMMIT;
