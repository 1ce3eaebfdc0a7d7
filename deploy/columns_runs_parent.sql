-- Deploy runq:columns_runs_parent to pg
-- requires: table_runs
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (no row is rewritten), waiting at most 2 s for it.

BEGIN;

-- A child run's parent (runq.spawn), how many children a run spawned, and
-- how many of them a run waiting for its children still waits for
-- (runq.wait_children counts them; each one's end counts down; the last one
-- queues the run). All NULL for a run that is neither: NULL columns are stored in the
-- catalog, no row rewritten, so the lock is brief on any number of runs.
-- The statements that end a run read both from the row they update anyway,
-- so a run with no family pays a test of two columns, no lookup: no index
-- covers them (a parent's children are found through runq.spawns).
-- No foreign key to the parent: runq.purge purges a parent and leaves its
-- finished children, whose parent_run_id then names a purged run.
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

ALTER TABLE runq.runs
    ADD COLUMN parent_run_id bigint,
    ADD COLUMN spawned runq.counter,
    ADD COLUMN waiting_on runq.counter;

COMMENT ON COLUMN runq.runs.parent_run_id IS
    'The run that spawned this one (runq.spawn), NULL for a run submitted. Not a foreign key: a purged parent leaves its children.';
COMMENT ON COLUMN runq.runs.spawned IS
    'How many children the run spawned (runq.spawn), NULL for none: the fan-out cap reads it, and a run that ends with it set cancels its live children.';

COMMENT ON COLUMN runq.runs.waiting_on IS
    'While the run is waiting_for_children: how many of its children are not yet terminal; the end of the last one queues it (NULL otherwise).';

COMMIT;
