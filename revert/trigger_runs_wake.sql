-- Revert runq:trigger_runs_wake from pg
-- Locks: ACCESS EXCLUSIVE on runq.runs for a catalog update, waiting at most 2 s for it.

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

DROP TRIGGER runs_wake ON runq.runs;

COMMIT;
