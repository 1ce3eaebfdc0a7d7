-- Needs a fresh database (tests/run makes one): index entries left by rolled-back
-- earlier runs of this file would be read, and counted, by the claims here.
-- A claim is a few index probes, never a scan of the backlog: its cost must
-- not grow with queued runs of other classes, nor with runs scheduled for
-- later, nor with the backlog of its own class. Measured as the buffers the
-- whole runq.claim call touches (EXPLAIN's FunctionScan counts the function's
-- inner statements too), first on a near-empty queue, then with 1,000,000
-- queued async runs and 200,000 runs scheduled for tomorrow.
BEGIN;
SELECT plan(9);

-- Buffers (hit + read) one call of runq.claim(classes) touches. Test-only
-- dynamic SQL: EXPLAIN cannot take the array as a parameter.
CREATE FUNCTION pg_temp.claim_buffers(classes integer[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_plan json;
BEGIN
    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM runq.claim(%L::integer[])', classes)
       INTO v_plan;
    RETURN (v_plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint
         + (v_plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END $$;

-- Near-empty queue: after the warm-up claim, one interactive and one async run.
SELECT runq.submit('plan', 'k', priority => 0);
SELECT runq.submit('plan', 'k', priority => 10);
SELECT runq.submit('plan', 'k', priority => 0);
SELECT runq.submit('plan', 'k', priority => 0);
SELECT run_id FROM runq.claim(ARRAY[0, 10], max_runs => 2);  -- warm plan caches
SELECT pg_temp.claim_buffers(ARRAY[0]) AS empty_interactive \gset
SELECT pg_temp.claim_buffers(ARRAY[10]) AS empty_async \gset
SELECT pg_temp.claim_buffers(ARRAY[0]) AS empty_none \gset

-- The backlog, written straight into the table (as a bulk load would be).
INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)
SELECT now() - interval '1 hour' + g * interval '1 millisecond', now(), 10, 'plan', 'k'
  FROM generate_series(1, 1000000) AS g;
INSERT INTO runq.runs (created_at, updated_at, scheduled_for, priority, tenant_id, kind)
SELECT now() - interval '2 hours', now(), now() + interval '1 day', p, 'plan', 'k'
  FROM generate_series(1, 100000) AS g, (VALUES (0), (10)) AS c (p);
ANALYZE runq.runs;

SELECT runq.submit('plan', 'k', priority => 0);
SELECT run_id FROM runq.claim(ARRAY[20]);  -- nothing in class 20: re-plan after ANALYZE
SELECT pg_temp.claim_buffers(ARRAY[0]) AS backlog_interactive \gset
SELECT pg_temp.claim_buffers(ARRAY[0]) AS backlog_none \gset
SELECT pg_temp.claim_buffers(ARRAY[10]) AS backlog_async \gset
SELECT pg_temp.claim_buffers(ARRAY[0, 10]) AS backlog_both \gset

-- The +20 allows for deeper B-trees: the claim descends five indexes, each
-- a level or two deeper at 1.2M rows. A scan of the backlog would cost
-- thousands.
SELECT cmp_ok(:backlog_interactive::bigint, '<=', :empty_interactive::bigint + 20,
    'an interactive claim costs no more with 1.2M async and scheduled runs queued');
SELECT cmp_ok(:backlog_none::bigint, '<=', :empty_none::bigint + 20,
    'finding nothing ready costs no more with 100k interactive runs scheduled for later');
SELECT cmp_ok(:backlog_async::bigint, '<=', :empty_async::bigint + 20,
    'an async claim costs no more with its own class 1M deep');
SELECT cmp_ok(:backlog_interactive::bigint, '<', 60::bigint, 'an interactive claim touches a handful of buffers');
SELECT cmp_ok(:backlog_none::bigint, '<', 60::bigint, 'an empty claim touches a handful of buffers');
SELECT cmp_ok(:backlog_async::bigint, '<', 60::bigint, 'an async claim touches a handful of buffers');
SELECT cmp_ok(:backlog_both::bigint, '<', 60::bigint, 'a two-class claim touches a handful of buffers');

-- The claim's pick, as a generic plan (parameters like the function's), walks
-- runs_claimable_idx with both the class and the ready time as index conditions.
PREPARE pick(integer[], timestamptz, integer) AS
    SELECT r.run_id FROM runq.runs AS r
     WHERE r.status = 'queued' AND NOT r.parked AND r.priority = ANY ($1) AND r.ready_at <= $2
     ORDER BY r.priority, r.ready_at, r.run_id
     LIMIT $3 FOR UPDATE SKIP LOCKED;
SET LOCAL plan_cache_mode = force_generic_plan;
CREATE FUNCTION pg_temp.pick_plan() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_line text;
    v_all  text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (COSTS OFF) EXECUTE pick(''{0}'', now(), 1)' LOOP
        v_all := v_all || v_line || E'\n';
    END LOOP;
    RETURN v_all;
END $$;

SELECT matches(pg_temp.pick_plan(), 'Index Scan using runs_claimable_idx',
    'the pick walks runs_claimable_idx');
SELECT matches(pg_temp.pick_plan(), 'Index Cond: \(\(\(?priority\)?(::smallint)? = ANY \(\$1\)\) AND \(ready_at <= \$2\)\)',
    'class and ready time are both index conditions, so future runs end the walk');

SELECT diag(format('buffers per claim, near-empty vs backlog: interactive %s/%s, none ready %s/%s, async %s/%s, both %s',
    :empty_interactive, :backlog_interactive, :empty_none, :backlog_none, :empty_async, :backlog_async, :backlog_both));
SELECT * FROM finish();
ROLLBACK;
