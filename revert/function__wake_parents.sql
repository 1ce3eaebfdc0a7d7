-- Revert runq:function__wake_parents from pg

BEGIN;

DROP FUNCTION runq._family_ended(bigint[], bigint[], timestamptz);
DROP FUNCTION runq._lock_parents(bigint[]);
DROP FUNCTION runq._wake_parents(bigint[], timestamptz);

COMMIT;
