-- A worker's fenced write finds its run by primary key, whatever the number
-- of running runs and however stale the statistics: measured as the buffers
-- one call touches, with 10,000 runs running that ANALYZE last saw queued
-- (the case in which a status-keyed index once looked cheaper than the key).
BEGIN;
SELECT plan(4);

\ir helpers/buffers.sql

INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)
SELECT now(), now(), 10, 'plan', 'k' FROM generate_series(1, 10000);
ANALYZE runq.runs;
-- All of them running now, behind the statistics' back.
SELECT count(*) FROM runq.claim(ARRAY[10], 'w', interval '1 hour', 10000);
SELECT max(run_id) AS last FROM runq.runs \gset

SELECT runq.heartbeat(:last - 1, 1);  -- warm the plan caches
SELECT runq.checkpoint(:last - 1, 1, '{}');
SELECT runq.complete(:last - 2, 1);

SELECT cmp_ok(pg_temp.call_buffers(format('SELECT runq.heartbeat(%s, 1)', :last)), '<', 20::bigint,
              'a heartbeat touches a handful of buffers with 10,000 runs running');
SELECT cmp_ok(pg_temp.call_buffers(format('SELECT runq.checkpoint(%s, 1, ''{}'')', :last)), '<', 40::bigint,
              'a checkpoint touches a handful of buffers');
SELECT cmp_ok(pg_temp.call_buffers(format('SELECT runq.complete(%s, 1)', :last)), '<', 40::bigint,
              'a complete touches a handful of buffers');
SELECT cmp_ok(pg_temp.call_buffers(format('SELECT runq.heartbeat(%s, 1)', :last - 3)), '<', 20::bigint,
              'a heartbeat of another run too');

SELECT * FROM finish();
ROLLBACK;
