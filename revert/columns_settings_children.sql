-- Revert runq:columns_settings_children from pg
-- Locks: ACCESS EXCLUSIVE on runq.settings (one row), waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.settings
    DROP COLUMN max_children,
    DROP COLUMN max_child_depth;

COMMIT;
