-- Revert runq:view_limits from pg

BEGIN;

DROP VIEW runq.limits;

COMMIT;
