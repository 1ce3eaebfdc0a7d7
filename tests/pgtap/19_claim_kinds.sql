-- claim's kinds (v0.2): runq.claim(classes, worker_id, lease, max_runs,
-- kinds text[] DEFAULT NULL) replaces the four-argument claim. With kinds
-- NULL it claims as before; with kinds it claims only queued runs of those
-- kinds, in the same order (class, then coalesce(scheduled_for, created_at),
-- then run_id), honouring max_runs and skipping runs scheduled for later;
-- runs of other kinds are untouched and keep their place. Repeated kinds or
-- classes change nothing. 22023, naming the value, for an empty kinds array,
-- a NULL element or a multidimensional array; a rejected claim changes
-- nothing. A claim by kind reads a handful of buffers however many queued
-- runs of other kinds are ahead of it in its class (see 20_claim_plan.sql).
-- Classes 1900..1999.
BEGIN;
SELECT plan(53);

-- What runq holds about every run of this file's classes, events included.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT json_agg(r ORDER BY r.run_id)::text FROM runq.runs AS r WHERE r.priority BETWEEN 1900 AND 1999),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e
          WHERE e.run_id IN (SELECT r.run_id FROM runq.runs AS r WHERE r.priority BETWEEN 1900 AND 1999)))
$$;
-- A call's SQLSTATE and message, or 'ok' and the number of rows it returned.
CREATE FUNCTION pg_temp.outcome(p_call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_rows bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM (%s) AS x', p_call) INTO v_rows;
    RETURN 'ok ' || v_rows;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
-- status/attempts/lease_epoch of some runs, in the order given.
CREATE FUNCTION pg_temp.shape(p_runs bigint[]) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s/%s/%s', r.status, r.attempts, r.lease_epoch), ' ' ORDER BY o.n)
      FROM unnest(p_runs) WITH ORDINALITY AS o (run_id, n) JOIN runq.runs AS r USING (run_id)
$$;

-- ---------------------------------------------------------------------------
-- The signature
-- ---------------------------------------------------------------------------
SELECT has_function('runq', 'claim', ARRAY['integer[]', 'text', 'interval', 'integer', 'text[]'],
                    'runq.claim(integer[], text, interval, integer, text[]) exists');
SELECT hasnt_function('runq', 'claim', ARRAY['integer[]', 'text', 'interval', 'integer'],
                      'the four-argument runq.claim is gone (no overload to pick by mistake)');

-- ---------------------------------------------------------------------------
-- Only the kinds asked for, in claim order; the others keep their place
-- ---------------------------------------------------------------------------
-- Submitted in this order: a1(1901) b1(1900) a2(1900) c1(1900) a3(1900, in an
-- hour) b2(1901) a4(1900, scheduled in 2000) a5(1902) a6(1901) a7(1901).
SELECT run_id AS a1 FROM runq.submit(tenant_id => 'kinds', kind => 'a', priority => 1901) \gset
SELECT run_id AS b1 FROM runq.submit(tenant_id => 'kinds', kind => 'b', priority => 1900) \gset
SELECT run_id AS a2 FROM runq.submit(tenant_id => 'kinds', kind => 'a', priority => 1900) \gset
SELECT run_id AS c1 FROM runq.submit(tenant_id => 'kinds', kind => 'c', priority => 1900) \gset
SELECT run_id AS a3 FROM runq.submit(tenant_id => 'kinds', kind => 'a', priority => 1900,
                                     scheduled_for => now() + interval '1 hour') \gset
SELECT run_id AS b2 FROM runq.submit(tenant_id => 'kinds', kind => 'b', priority => 1901) \gset
SELECT run_id AS a4 FROM runq.submit(tenant_id => 'kinds', kind => 'a', priority => 1900,
                                     scheduled_for => '2000-01-01 00:00:00+00') \gset
SELECT run_id AS a5 FROM runq.submit(tenant_id => 'kinds', kind => 'a', priority => 1902) \gset
SELECT run_id AS a6 FROM runq.submit(tenant_id => 'kinds', kind => 'a', priority => 1901) \gset
SELECT run_id AS a7 FROM runq.submit(tenant_id => 'kinds', kind => 'a', priority => 1901) \gset
CREATE TEMP TABLE others_before ON COMMIT DROP AS
SELECT json_agg(r ORDER BY r.run_id)::text AS s FROM runq.runs AS r WHERE r.run_id IN (:b1, :c1, :b2);

SELECT is((SELECT run_id FROM runq.claim(ARRAY[1900, 1901], kinds => ARRAY['a'])), :a4::bigint,
          'kinds a: a run scheduled in the past is the first ready in its class');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1901, 1900], kinds => ARRAY['a'])), :a2::bigint,
          'kinds a: then the oldest a of the lowest class, though b1 is older (the order of classes does not matter)');
SELECT is((SELECT array_agg(run_id ORDER BY run_id) FROM runq.claim(ARRAY[1900, 1901], kinds => ARRAY['a'], max_runs => 2)),
          ARRAY[:a1, :a6]::bigint[],
          'kinds a, max_runs 2: two runs, the oldest a of the next class (a3 is in the future)');
SELECT is((SELECT array_agg(run_id ORDER BY run_id) FROM runq.claim(ARRAY[1900, 1901], kinds => ARRAY['a'], max_runs => 5)),
          ARRAY[:a7]::bigint[], 'kinds a, max_runs 5: what is ready of kind a and no more');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1900, 1901], kinds => ARRAY['a'], max_runs => 5)), 0,
          'kinds a: zero rows, though runs of other kinds are ready');
SELECT is(pg_temp.shape(ARRAY[:a4, :a2, :a1, :a6, :a7]), 'running/1/1 running/1/1 running/1/1 running/1/1 running/1/1',
          'each run of kind a claimed once: running, attempt 1, epoch 1');
SELECT is(pg_temp.shape(ARRAY[:a3, :a5]), 'queued/0/0 queued/0/0',
          'the a scheduled for later and the a of a class not asked for are still queued');
SELECT is((SELECT json_agg(r ORDER BY r.run_id)::text FROM runq.runs AS r WHERE r.run_id IN (:b1, :c1, :b2)),
          (SELECT s FROM others_before), 'the runs of other kinds are untouched');
SELECT is((SELECT string_agg(e.type, ',') FROM runq.run_events AS e WHERE e.run_id IN (:b1, :c1, :b2)),
          'run.created,run.created,run.created', 'and have no event but run.created');

-- A claim without kinds takes the skipped runs in their original order.
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1900, 1901])), :b1::bigint,
          'without kinds: the oldest run of the lowest class, skipped by the kinds claims, comes first');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1900, 1901])), :c1::bigint, 'then the next of that class');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1900, 1901])), :b2::bigint, 'then the next class');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1900, 1901, 1902], kinds => ARRAY['a'])), :a5::bigint,
          'kinds a over three classes: the a of the class now asked for');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1900, 1901, 1902], max_runs => 10)), 0,
          'zero rows: only a3, in the future, is left');

-- ---------------------------------------------------------------------------
-- Several kinds; kinds NULL claims as before
-- ---------------------------------------------------------------------------
-- Submitted in this order: x1 z1 y1 z2 x2, all of class 1910.
SELECT run_id AS x1 FROM runq.submit(tenant_id => 'kinds', kind => 'x', priority => 1910) \gset
SELECT run_id AS z1 FROM runq.submit(tenant_id => 'kinds', kind => 'z', priority => 1910) \gset
SELECT run_id AS y1 FROM runq.submit(tenant_id => 'kinds', kind => 'y', priority => 1910) \gset
SELECT run_id AS z2 FROM runq.submit(tenant_id => 'kinds', kind => 'z', priority => 1910) \gset
SELECT run_id AS x2 FROM runq.submit(tenant_id => 'kinds', kind => 'x', priority => 1910) \gset
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1910], kinds => ARRAY['y', 'x'])), :x1::bigint,
          'kinds y, x: the oldest run of either kind (the order of kinds does not matter)');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1910], kinds => ARRAY['y', 'x'])), :y1::bigint,
          'kinds y, x: then the next, passing over z1');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1910], kinds => ARRAY['z'])), :z1::bigint,
          'kinds z: the skipped z1 is the first of its kind');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1910], NULL, NULL, 1, NULL)), :z2::bigint,
          'kinds NULL in positional notation: the oldest run, whatever its kind');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1910], kinds => NULL)), :x2::bigint,
          'kinds => NULL: the oldest run, whatever its kind');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1910], kinds => NULL, max_runs => 5)), 0,
          'kinds => NULL: zero rows when nothing is ready');

-- ---------------------------------------------------------------------------
-- Repeated kinds or classes: no run claimed twice, max_runs honoured
-- ---------------------------------------------------------------------------
-- Submitted in this order: d1(1921) d2(1920) e1(1920) f1(1920) d3(1921) d4(1920).
SELECT run_id AS d1 FROM runq.submit(tenant_id => 'kinds', kind => 'd', priority => 1921) \gset
SELECT run_id AS d2 FROM runq.submit(tenant_id => 'kinds', kind => 'd', priority => 1920) \gset
SELECT run_id AS e1 FROM runq.submit(tenant_id => 'kinds', kind => 'e', priority => 1920) \gset
SELECT run_id AS f1 FROM runq.submit(tenant_id => 'kinds', kind => 'f', priority => 1920) \gset
SELECT run_id AS d3 FROM runq.submit(tenant_id => 'kinds', kind => 'd', priority => 1921) \gset
SELECT run_id AS d4 FROM runq.submit(tenant_id => 'kinds', kind => 'd', priority => 1920) \gset

CREATE TEMP TABLE dup1 ON COMMIT DROP AS
SELECT * FROM runq.claim(ARRAY[1920, 1920, 1921, 1920], kinds => ARRAY['d', 'e', 'd', 'd'], max_runs => 3);
SELECT is((SELECT count(*)::int FROM dup1), 3, 'repeated classes and kinds, max_runs 3: three rows');
SELECT is((SELECT array_agg(run_id ORDER BY run_id) FROM dup1), ARRAY[:d2, :e1, :d4]::bigint[],
          'three distinct runs, the first three of kinds d and e in claim order (f1 passed over)');
CREATE TEMP TABLE dup2 ON COMMIT DROP AS
SELECT * FROM runq.claim(ARRAY[1921, 1921], kinds => ARRAY['d', 'd'], max_runs => 10);
SELECT is((SELECT array_agg(run_id ORDER BY run_id) FROM dup2), ARRAY[:d1, :d3]::bigint[],
          'repeated class and kind, max_runs 10: each ready run once');
SELECT is((SELECT array_agg(DISTINCT epoch) FROM (SELECT epoch FROM dup1 UNION ALL SELECT epoch FROM dup2) AS x),
          ARRAY[1]::bigint[], 'every run claimed with epoch 1');
SELECT is(pg_temp.shape(ARRAY[:d1, :d2, :e1, :d3, :d4, :f1]),
          'running/1/1 running/1/1 running/1/1 running/1/1 running/1/1 queued/0/0',
          'each claimed once (attempt 1, epoch 1); the f run still queued');
SELECT is((SELECT count(*)::int FROM runq.run_events AS e
            WHERE e.run_id IN (:d1, :d2, :e1, :d3, :d4) AND e.type = 'run.claimed'), 5,
          'one run.claimed per claimed run');
SELECT is((SELECT array_agg(run_id) FROM runq.claim(ARRAY[1920, 1921, 1920], max_runs => 5)), ARRAY[:f1]::bigint[],
          'repeated classes without kinds: the one run left, once');

-- ---------------------------------------------------------------------------
-- Bad kinds: 22023 naming the value, and nothing changes; a kind that
-- matches nothing: zero rows
-- ---------------------------------------------------------------------------
SELECT run_id AS g1 FROM runq.submit(tenant_id => 'kinds', kind => 'g', priority => 1930) \gset
CREATE TEMP TABLE before ON COMMIT DROP AS SELECT pg_temp.state() AS s;

SELECT matches(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => '{}')$$),
               '^22023 .*kinds.*\{\}', '22023 for an empty kinds array, named in the message');
SELECT matches(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => ARRAY[]::text[], max_runs => 5)$$),
               '^22023 .*kinds.*\{\}', '22023 for ARRAY[]::text[] too');
SELECT matches(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => ARRAY['g', NULL])$$),
               '^22023 .*kinds.*NULL', '22023 for a NULL element among kinds, named in the message');
SELECT matches(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => '{NULL}')$$),
               '^22023 .*kinds.*NULL', '22023 for kinds holding only NULL');
SELECT matches(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => '{{g},{h}}')$$),
               '^22023 .*kinds.*\{\{g\},\{h\}\}', '22023 for a two-dimensional kinds array, named in the message');
SELECT matches(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => '{{g}}', max_runs => 5)$$),
               '^22023 .*kinds.*\{\{g\}\}', '22023 for a two-dimensional kinds array of one element');
SELECT is(pg_temp.state(), (SELECT s FROM before), 'the rejected claims changed nothing');

SELECT is(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => ARRAY['nothing'], max_runs => 5)$$),
          'ok 0', 'a kind that matches nothing: zero rows');
SELECT is(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1930], kinds => ARRAY['G', ' g'])$$),
          'ok 0', 'kinds match exactly (no case folding, no trimming): zero rows');
SELECT is(pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[1931], kinds => ARRAY['g'])$$),
          'ok 0', 'the kind in a class not asked for: zero rows');
SELECT is(pg_temp.state(), (SELECT s FROM before), 'and the claims that found nothing changed nothing');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1930], kinds => '{g}')), :g1::bigint,
          'kinds as an untyped literal: the run of that kind');

-- ---------------------------------------------------------------------------
-- A claim by kind returns what any claim returns, resumed runs included
-- ---------------------------------------------------------------------------
SELECT run_id AS o1 FROM runq.submit(tenant_id => 'kinds', kind => 'o', priority => 1940) \gset
SELECT run_id AS r1 FROM runq.submit(tenant_id => 'kinds', kind => 'r', payload => '{"n": 1}',
                                     session_id => 'kinds-s', priority => 1940) \gset
CREATE TEMP TABLE first_claim ON COMMIT DROP AS
SELECT * FROM runq.claim(ARRAY[1940], worker_id => 'w-kinds', lease => interval '1 hour', kinds => ARRAY['r']);
SELECT is((SELECT format('%s %s %s %s %s %s %s %s %s %s %s', run_id, epoch, tenant_id, session_id, kind, priority,
                         payload, attempt, coalesce(checkpoint::text, 'NULL'), inputs, resumed) FROM first_claim),
          format('%s 1 kinds kinds-s r 1940 {"n": 1} 1 NULL [] f', :r1),
          'the row of a claim by kind: run, epoch 1, tenant, session, kind, class, payload, attempt 1, no checkpoint, no inputs, not resumed');
SELECT ok((SELECT lease_expires_at BETWEEN clock_timestamp() + interval '59 minutes' AND clock_timestamp() + interval '1 hour'
             FROM first_claim), 'lease_expires_at is the lease from now');
SELECT is((SELECT e.payload FROM runq.run_events(:r1) AS e WHERE e.type = 'run.claimed'),
          '{"worker_id": "w-kinds", "attempt": 1}'::jsonb, 'run.claimed names the worker and the attempt');
SELECT is(runq.checkpoint(:r1, 1, '{"step": 1}') AND runq.release(:r1, 1), true, 'it checkpoints and is released');
SELECT is((SELECT format('%s %s %s %s', epoch, attempt, checkpoint, resumed)
             FROM runq.claim(ARRAY[1940], kinds => ARRAY['r'])),
          '2 1 {"step": 1} t', 'claimed again by kind: epoch 2, attempt 1, its checkpoint, resumed');
SELECT is(pg_temp.shape(ARRAY[:o1]), 'queued/0/0', 'the run of the other kind, older, is still queued');

-- ---------------------------------------------------------------------------
-- The cost of a claim by kind: a handful of buffers, however many queued runs
-- of other kinds are ahead of it in its class. Measured as in
-- 20_claim_plan.sql: the buffers the whole runq.claim call touches.
-- ---------------------------------------------------------------------------
CREATE FUNCTION pg_temp.claim_buffers(classes integer[], kinds text[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_plan json;
BEGIN
    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM runq.claim(%L::integer[], kinds => %L::text[])',
                   classes, kinds)
       INTO v_plan;
    RETURN (v_plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint
         + (v_plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END $$;

-- 10,000 queued runs of kind 'other' in class 1990, an hour old, written
-- straight into the table (as a bulk load would be); then one run of kind
-- 'mine' behind them, and one alone in class 1991 for comparison.
INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)
SELECT now() - interval '1 hour' + g * interval '1 millisecond', now(), 1990, 'kinds', 'other'
  FROM generate_series(1, 10000) AS g;
SELECT run_id AS mine FROM runq.submit(tenant_id => 'kinds', kind => 'mine', priority => 1990) \gset
SELECT run_id AS alone FROM runq.submit(tenant_id => 'kinds', kind => 'mine', priority => 1991) \gset
ANALYZE runq.runs;
SELECT run_id FROM runq.claim(ARRAY[1999], kinds => ARRAY['mine']);  -- nothing in 1999: plan after ANALYZE

SELECT pg_temp.claim_buffers(ARRAY[1991], ARRAY['mine']) AS alone_buffers \gset
SELECT pg_temp.claim_buffers(ARRAY[1990], ARRAY['mine']) AS behind_buffers \gset
SELECT pg_temp.claim_buffers(ARRAY[1990], ARRAY['nothing']) AS nothing_buffers \gset

SELECT is(pg_temp.shape(ARRAY[:alone, :mine]), 'running/1/1 running/1/1', 'both runs of kind mine were claimed');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE priority = 1990 AND status = 'queued' AND kind = 'other'), 10000,
          'the 10,000 runs of kind other are all still queued');
SELECT cmp_ok(:behind_buffers::bigint, '<=', :alone_buffers::bigint + 10,
    'a claim by kind costs no more behind 10,000 queued runs of another kind in its class');
SELECT cmp_ok(:nothing_buffers::bigint, '<=', :alone_buffers::bigint + 10,
    'a claim by a kind with no runs costs no more with 10,000 queued runs of another kind in the class');
SELECT cmp_ok(:behind_buffers::bigint, '<', 40::bigint, 'a claim by kind touches a handful of buffers');
SELECT cmp_ok(:nothing_buffers::bigint, '<', 40::bigint, 'a claim by kind that finds nothing touches a handful of buffers');

SELECT diag(format('buffers per claim by kind: alone in its class %s, behind 10,000 of another kind %s, nothing of that kind %s',
    :alone_buffers, :behind_buffers, :nothing_buffers));
SELECT * FROM finish();
ROLLBACK;
