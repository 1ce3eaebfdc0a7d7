-- Revert runq:index_run_events_fenced from pg

BEGIN;

DROP INDEX runq.run_events_fenced_key;

COMMIT;
