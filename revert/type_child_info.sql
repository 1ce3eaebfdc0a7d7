-- Revert runq:type_child_info from pg

BEGIN;

DROP TYPE runq.child_info;

COMMIT;
