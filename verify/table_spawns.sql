-- Verify runq:table_spawns on pg

BEGIN;

SELECT parent_run_id, key, run_id, request_hash FROM runq.spawns WHERE false;

ROLLBACK;
