-- Revert runq:column_runs_parked from pg
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update (the column's space is reclaimed as rows are rewritten later), waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Parked runs become ordinary queued runs again: the indexes that knew them
-- went first (the plan's order), and the claim before them no longer asks.
ALTER TABLE runq.runs DROP COLUMN parked;

COMMIT;
