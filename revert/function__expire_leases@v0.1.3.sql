-- Revert runq:function__expire_leases from pg

BEGIN;

DROP FUNCTION runq._expire_leases(bigint[], boolean, timestamptz);

COMMIT;
