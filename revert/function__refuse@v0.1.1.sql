-- Revert runq:function__refuse from pg

BEGIN;

DROP FUNCTION runq._refuse(bigint, bigint, text, boolean);

COMMIT;
