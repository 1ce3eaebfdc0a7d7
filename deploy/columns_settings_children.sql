-- Deploy runq:columns_settings_children to pg
-- requires: table_settings
-- Locks: ACCESS EXCLUSIVE on runq.settings (one row) for the new columns, waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The caps of runq.spawn, which a DBA may UPDATE in place: a runaway agent
-- that spawns itself stops at a depth, and one that loops on spawn at a
-- fan-out, with 22023, instead of filling the queue.
-- The table has one row: its rewrite and the CHECKs' scan are of that row.
-- squawk-ignore adding-field-with-default, adding-not-nullable-field, constraint-missing-not-valid
ALTER TABLE runq.settings
    ADD COLUMN max_child_depth bigint NOT NULL DEFAULT 8 CHECK (max_child_depth >= 1),
    ADD COLUMN max_children bigint NOT NULL DEFAULT 10000 CHECK (max_children >= 1);

COMMENT ON COLUMN runq.settings.max_child_depth IS
    'The deepest a child run may be (a submitted run is at depth 0, its children at 1): runq.spawn of a deeper one raises 22023.';
COMMENT ON COLUMN runq.settings.max_children IS
    'The most children one run may spawn over its life: runq.spawn of one more raises 22023.';

COMMIT;
