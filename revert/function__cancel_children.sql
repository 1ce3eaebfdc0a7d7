-- Revert runq:function__cancel_children from pg

BEGIN;

DROP FUNCTION runq._cancel_children(bigint[], timestamptz);

COMMIT;
