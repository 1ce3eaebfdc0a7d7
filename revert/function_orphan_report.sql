-- Revert runq:function_orphan_report from pg

BEGIN;

DROP FUNCTION runq.orphan_report(interval);

COMMIT;
