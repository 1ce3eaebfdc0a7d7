-- Revert runq:view_pauses from pg

BEGIN;

DROP VIEW runq.pauses;

COMMIT;
