-- Revert runq:function__usage_totals from pg

BEGIN;

DROP FUNCTION runq._usage_totals(bigint);

COMMIT;
