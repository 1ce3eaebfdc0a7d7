-- Revert runq:columns_runs_parent from pg
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (the columns' space is reclaimed as rows are rewritten later), waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs
    DROP COLUMN waiting_on,
    DROP COLUMN spawned,
    DROP COLUMN parent_run_id;

COMMIT;
