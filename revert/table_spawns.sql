-- Revert runq:table_spawns from pg
-- Locks: SHARE ROW EXCLUSIVE on runq.runs to drop the foreign key's triggers, waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP TABLE runq.spawns;

COMMIT;
