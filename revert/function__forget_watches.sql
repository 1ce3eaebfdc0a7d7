-- Revert runq:function__forget_watches from pg

BEGIN;

DROP FUNCTION runq._forget_watches();

COMMIT;
