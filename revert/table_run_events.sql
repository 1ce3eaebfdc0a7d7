-- Revert runq:table_run_events from pg

BEGIN;

DROP TABLE runq.run_events;

COMMIT;
