-- Verify runq:columns_settings_children on pg

BEGIN;

SELECT max_child_depth, max_children FROM runq.settings WHERE false;

ROLLBACK;
