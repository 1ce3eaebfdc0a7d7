-- Revert runq:function__deliver_input from pg

BEGIN;

DROP FUNCTION runq._deliver_input(bigint, jsonb, timestamptz);

COMMIT;
