-- Concurrency limits and pause (v0.2). runq.set_limit(scope, key,
-- max_running): a tenant or kind row, or with key NULL the default of every
-- tenant (kind) without a row; max_running NULL removes the row. runq.limits
-- shows scope, key, max_running and running (the count of running runs of a
-- keyed row, 0 when none, NULL for a default row). A claim never takes a run
-- whose tenant or kind is at its limit of running runs; waiting_for_user and
-- queued runs do not count (a queued run of a class or kind not being claimed
-- holds no slot); an answered, released, redriven or cancelled run gives up or
-- waits for a slot like any other; a run passed over keeps its place and the
-- claim goes on to the next run in claim order (no head-of-line blocking), by
-- kind too; lowering a limit below the count stops new claims for that key
-- until the count falls under it, running runs untouched; raising or removing
-- a limit makes the waiting runs claimable at once; a run scheduled for later
-- under a limit is claimable once due, after runq.sweep(). runq.pause(scope,
-- key, reason) / runq.resume(scope, key) of a class, kind, tenant or schedule:
-- true when they paused (resumed), false when already paused (not paused);
-- queued runs under a pause are not claimed and keep their place, running runs
-- go on, submit still accepts, resume makes them claimable at once;
-- runq.pauses shows scope, key, reason, paused_at; a paused schedule only
-- records its row. 22023 naming the value for a bad scope, max_running, a NULL
-- key or a class key that is not an integer 0..32767, and a rejected call
-- changes nothing. runq_worker and runq_client can neither call these nor read
-- the views (42501); runq_admin can. Classes 2400..2499; tenants, kinds and
-- schedules named lp-*.
BEGIN;
SELECT plan(311);

-- Submit a run of this file; its id.
CREATE FUNCTION pg_temp.run(p_tenant text, p_class integer, p_kind text DEFAULT 'lp-work',
                            p_at timestamptz DEFAULT NULL) RETURNS bigint LANGUAGE sql AS $$
    SELECT s.run_id FROM runq.submit(tenant_id => p_tenant, kind => p_kind, priority => p_class,
                                     scheduled_for => p_at) AS s
$$;
-- One claim: the runs it took, in the order it returned them.
CREATE FUNCTION pg_temp.claim(p_classes integer[], p_max integer DEFAULT 10, p_kinds text[] DEFAULT NULL)
    RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(c.run_id ORDER BY c.ordinality), '{}')
      FROM runq.claim(p_classes, worker_id => 'w-lp', max_runs => p_max, kinds => p_kinds)
           WITH ORDINALITY AS c
$$;
-- A run's current epoch.
CREATE FUNCTION pg_temp.epoch(bigint) RETURNS bigint LANGUAGE sql AS $$
    SELECT r.lease_epoch FROM runq.runs AS r WHERE r.run_id = $1
$$;
-- Complete a run under its current epoch.
CREATE FUNCTION pg_temp.done(bigint) RETURNS boolean LANGUAGE sql AS $$
    SELECT runq.complete($1, pg_temp.epoch($1))
$$;
-- The statuses of some runs as runq.get_run shows them, in the order given.
CREATE FUNCTION pg_temp.statuses(p_runs bigint[]) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(g.status, ' ' ORDER BY o.n)
      FROM unnest(p_runs) WITH ORDINALITY AS o (run_id, n), LATERAL runq.get_run(o.run_id) AS g
$$;
-- The rows of runq.limits this file can have made (default rows and lp-*
-- keys), of one scope or both: 'scope key max_running running', NULL as NULL.
CREATE FUNCTION pg_temp.limits(p_scope text DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s %s %s %s', l.scope, coalesce(l.key, 'NULL'), l.max_running,
                                      coalesce(l.running::text, 'NULL')),
                               '; ' ORDER BY l.scope COLLATE "C", l.key COLLATE "C" NULLS FIRST), '')
      FROM runq.limits AS l
     WHERE (l.key IS NULL OR l.key LIKE 'lp-%') AND (p_scope IS NULL OR l.scope = p_scope)
$$;
-- The rows of runq.pauses this file can have made: 'scope key reason'.
CREATE FUNCTION pg_temp.pauses() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s %s %s', p.scope, p.key, coalesce(p.reason, 'NULL')),
                               '; ' ORDER BY p.scope COLLATE "C", p.key COLLATE "C"), '')
      FROM runq.pauses AS p
     WHERE p.key LIKE 'lp-%' OR p.key IN ('0', '32767') OR p.key ~ '^24[0-9][0-9]$'
$$;
-- Everything a rejected call could change: both views (paused_at too), the
-- runs of this file's classes and their events.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT json_agg(l ORDER BY l.scope, l.key NULLS FIRST)::text FROM runq.limits AS l),
        (SELECT json_agg(p ORDER BY p.scope, p.key)::text FROM runq.pauses AS p),
        (SELECT json_agg(r ORDER BY r.run_id)::text FROM runq.runs AS r WHERE r.priority BETWEEN 2400 AND 2499),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e
          WHERE e.run_id IN (SELECT r.run_id FROM runq.runs AS r WHERE r.priority BETWEEN 2400 AND 2499)))
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

-- ---------------------------------------------------------------------------
-- The functions and the views
-- ---------------------------------------------------------------------------
SELECT has_function('runq', 'set_limit', ARRAY['text', 'text', 'integer'],
                    'runq.set_limit(text, text, integer) exists');
SELECT function_returns('runq', 'set_limit', ARRAY['text', 'text', 'integer'], 'void', 'runq.set_limit returns void');
SELECT has_function('runq', 'pause', ARRAY['text', 'text', 'text'], 'runq.pause(text, text, text) exists');
SELECT function_returns('runq', 'pause', ARRAY['text', 'text', 'text'], 'boolean', 'runq.pause returns boolean');
SELECT has_function('runq', 'resume', ARRAY['text', 'text'], 'runq.resume(text, text) exists');
SELECT function_returns('runq', 'resume', ARRAY['text', 'text'], 'boolean', 'runq.resume returns boolean');
SELECT has_view('runq', 'limits', 'runq.limits is a view');
SELECT is(ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute AS a
                 WHERE a.attrelid = 'runq.limits'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                 ORDER BY a.attnum),
          ARRAY['scope', 'key', 'max_running', 'running'],
          'runq.limits has the columns scope, key, max_running, running, in that order');
SELECT col_type_is('runq', 'limits', 'max_running', 'integer', 'runq.limits.max_running is an integer');
SELECT has_view('runq', 'pauses', 'runq.pauses is a view');
SELECT is(ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute AS a
                 WHERE a.attrelid = 'runq.pauses'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                 ORDER BY a.attnum),
          ARRAY['scope', 'key', 'reason', 'paused_at'],
          'runq.pauses has the columns scope, key, reason, paused_at, in that order');
SELECT col_type_is('runq', 'pauses', 'paused_at', 'timestamp with time zone',
                   'runq.pauses.paused_at is a timestamptz');

-- ---------------------------------------------------------------------------
-- Rows of runq.limits: defaults, keyed rows, replacing, removing
-- ---------------------------------------------------------------------------
SELECT is(pg_temp.limits(), '', 'no default row and no row of this file to begin with');
SELECT lives_ok($$SELECT runq.set_limit('tenant', NULL, 2)$$,
                'set_limit(''tenant'', NULL, 2): the default of every tenant without a row of its own');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-big', 3)$$, 'a tenant row above the default');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-one', 1)$$, 'a tenant row below the default');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-idle', 4)$$, 'a row for a tenant that has no runs');
SELECT lives_ok($$SELECT runq.set_limit('kind', 'lp-big', 7)$$, 'a kind row of the same key as a tenant row');
SELECT is(pg_temp.limits(),
          'kind lp-big 7 0; tenant NULL 2 NULL; tenant lp-big 3 0; tenant lp-idle 4 0; tenant lp-one 1 0',
          'runq.limits: one row each, the kind and the tenant of one key apart; running 0 for a keyed row with none, NULL for the default');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-idle', 5)$$, 'set_limit of a key that has a row');
SELECT lives_ok($$SELECT runq.set_limit('kind', 'lp-big', NULL)$$, 'max_running NULL removes a row');
SELECT is(pg_temp.limits(), 'tenant NULL 2 NULL; tenant lp-big 3 0; tenant lp-idle 5 0; tenant lp-one 1 0',
          'lp-idle has one row, now of 5; the kind row lp-big is gone, the tenant row lp-big stays');
CREATE TEMP TABLE rows_before ON COMMIT DROP AS SELECT pg_temp.state() AS s;
SELECT lives_ok($$SELECT runq.set_limit('kind', 'lp-big', NULL)$$, 'removing a row that is not there: no error');
SELECT lives_ok($$SELECT runq.set_limit('kind', NULL, NULL)$$, 'removing a default that is not there: no error');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-never', NULL)$$, 'removing a row of a key never seen: no error');
SELECT is(pg_temp.state(), (SELECT s FROM rows_before), 'removing what is not there changes nothing');

-- ---------------------------------------------------------------------------
-- Tenant limits: the default and keyed rows, no head-of-line blocking, a
-- skipped run keeps its place
-- ---------------------------------------------------------------------------
-- Submitted in this order, all of class 2410: a1 a2 a3 (lp-a, the default 2)
-- b1 b2 b3 b4 (lp-big, 3) c1 (lp-c, the default) a4 c2 c3 e1 e2 (lp-one, 1).
SELECT pg_temp.run('lp-a', 2410) AS a1, pg_temp.run('lp-a', 2410) AS a2, pg_temp.run('lp-a', 2410) AS a3 \gset
SELECT pg_temp.run('lp-big', 2410) AS b1, pg_temp.run('lp-big', 2410) AS b2, pg_temp.run('lp-big', 2410) AS b3,
       pg_temp.run('lp-big', 2410) AS b4 \gset
SELECT pg_temp.run('lp-c', 2410) AS c1, pg_temp.run('lp-a', 2410) AS a4, pg_temp.run('lp-c', 2410) AS c2,
       pg_temp.run('lp-c', 2410) AS c3 \gset
SELECT pg_temp.run('lp-one', 2410) AS e1, pg_temp.run('lp-one', 2410) AS e2 \gset

SELECT is(pg_temp.claim(ARRAY[2410], 5), ARRAY[:a1, :a2, :b1, :b2, :b3]::bigint[],
          'max_runs 5: lp-a up to the default 2, a3 passed over, then lp-big up to its own 3, in claim order');
SELECT is(pg_temp.statuses(ARRAY[:a3, :b4, :c1, :a4, :c2, :c3, :e1, :e2]),
          'queued queued queued queued queued queued queued queued', 'the other eight runs are queued');
SELECT is(pg_temp.claim(ARRAY[2410], 5), ARRAY[:c1, :c2, :e1]::bigint[],
          'the next claim passes over a3, b4, a4, c3 and e2: lp-c up to the default 2, lp-one up to its own 1');
SELECT is(pg_temp.claim(ARRAY[2410], 5), '{}'::bigint[],
          'every tenant at its limit: zero rows, though five runs of the class are queued');
SELECT is(pg_temp.statuses(ARRAY[:a3, :b4, :a4, :c3, :e2]), 'queued queued queued queued queued',
          'the runs passed over are still queued');
SELECT is(pg_temp.limits('tenant'), 'tenant NULL 2 NULL; tenant lp-big 3 3; tenant lp-idle 5 0; tenant lp-one 1 1',
          'runq.limits: running 3 for lp-big, 1 for lp-one, 0 for lp-idle, NULL for the default (lp-a and lp-c have no row)');

-- d1, of another tenant, newer than every run passed over.
SELECT pg_temp.run('lp-d', 2410) AS d1 \gset
SELECT is(pg_temp.done(:a1), true, 'a1 completes');
SELECT is(pg_temp.claim(ARRAY[2410], 1), ARRAY[:a3]::bigint[],
          'a3, the oldest run of lp-a passed over, is the next claimed, ahead of d1 of another tenant, newer');
SELECT is(pg_temp.claim(ARRAY[2410], 5), ARRAY[:d1]::bigint[], 'then d1; a4 waits, lp-a at its 2 again');
SELECT is(runq.fail(:b1, pg_temp.epoch(:b1), '{"code": "lp_failed"}'), true, 'b1 fails');
SELECT is(pg_temp.done(:c1), true, 'c1 completes');
SELECT is(pg_temp.claim(ARRAY[2410], 5), ARRAY[:b4, :c3]::bigint[],
          'a failed and a completed run each free a slot of their tenant: b4 and c3, in claim order');
SELECT is(pg_temp.limits('tenant'), 'tenant NULL 2 NULL; tenant lp-big 3 3; tenant lp-idle 5 0; tenant lp-one 1 1',
          'runq.limits: running follows the runs');
SELECT ok(runq.cancel(:e2) IS NOT NULL, 'e2, queued and passed over, is cancelled');
SELECT is(pg_temp.done(:e1), true, 'e1 completes');
SELECT is(pg_temp.claim(ARRAY[2410], 5), '{}'::bigint[],
          'lp-one has room, but its one waiting run was cancelled: nothing to claim');
SELECT is(pg_temp.statuses(ARRAY[:e2, :a4]), 'cancelled queued', 'e2 stays cancelled, a4 queued');

-- 53 runs of lp-flood, then x1 (lp-x) and y1 (lp-y), all of class 2415.
SELECT pg_temp.run('lp-flood', 2415) AS f1, pg_temp.run('lp-flood', 2415) AS f2,
       pg_temp.run('lp-flood', 2415) AS f3 \gset
SELECT count(pg_temp.run('lp-flood', 2415)) AS flood FROM generate_series(1, 50) \gset
SELECT pg_temp.run('lp-x', 2415) AS x1, pg_temp.run('lp-y', 2415) AS y1 \gset
SELECT is(pg_temp.claim(ARRAY[2415], 5), ARRAY[:f1, :f2, :x1, :y1]::bigint[],
          'a tenant at its limit with 51 runs queued blocks no one: f1 and f2, then x1 and y1 behind its backlog');
SELECT is(pg_temp.claim(ARRAY[2415], 5), '{}'::bigint[], 'then zero rows');
SELECT is(pg_temp.done(:f1), true, 'f1 completes');
SELECT is(pg_temp.claim(ARRAY[2415], 5, ARRAY['lp-work']), ARRAY[:f3]::bigint[],
          'a claim by kind honours the tenant limit too: one slot, to f3, the oldest waiting');
SELECT is(pg_temp.claim(ARRAY[2415], 5, ARRAY['lp-work']), '{}'::bigint[], 'and takes no second');

-- ---------------------------------------------------------------------------
-- waiting_for_user does not count; an answered run needs a slot again
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'lp-w', 1) AS _ \gset
SELECT pg_temp.run('lp-w', 2420) AS w1, pg_temp.run('lp-w', 2420) AS w2 \gset
SELECT is(pg_temp.claim(ARRAY[2420], 5), ARRAY[:w1]::bigint[], 'lp-w, limit 1: w1 only');
SELECT is(runq.ask_user(:w1, 1, '{"q": "which one?"}'), true, 'w1 asks the user');
SELECT is((SELECT l.running::int FROM runq.limits AS l WHERE l.scope = 'tenant' AND l.key = 'lp-w'), 0,
          'a waiting_for_user run does not count: lp-w runs 0');
SELECT is(pg_temp.claim(ARRAY[2420], 5), ARRAY[:w2]::bigint[], 'the slot w1 held is free: w2 is claimed');
SELECT is(runq.deliver_input(:w1, '{"a": "this one"}'), true, 'the user answers w1');
SELECT is(pg_temp.claim(ARRAY[2420], 5), '{}'::bigint[], 'the answered run needs a slot again: none while w2 runs');
SELECT is(pg_temp.statuses(ARRAY[:w1]), 'queued', 'w1 is queued');
SELECT is((SELECT l.running::int FROM runq.limits AS l WHERE l.scope = 'tenant' AND l.key = 'lp-w'), 1,
          'lp-w runs 1');
SELECT is(pg_temp.done(:w2), true, 'w2 completes');
SELECT is(pg_temp.claim(ARRAY[2420], 5), ARRAY[:w1]::bigint[], 'then w1 is claimed again');
SELECT is(pg_temp.epoch(:w1), 2::bigint, 'under epoch 2');

-- A released run keeps its place.
SELECT runq.set_limit('tenant', 'lp-r', 1) AS _ \gset
SELECT pg_temp.run('lp-r', 2425) AS r1, pg_temp.run('lp-r', 2425) AS r2 \gset
SELECT is(pg_temp.claim(ARRAY[2425], 5), ARRAY[:r1]::bigint[], 'lp-r, limit 1: r1 only');
SELECT is(runq.release(:r1, 1), true, 'r1 is released, queued again');
SELECT is(pg_temp.claim(ARRAY[2425], 1), ARRAY[:r1]::bigint[],
          'the released run keeps its place: claimed again before r2, newer');
SELECT is(pg_temp.claim(ARRAY[2425], 5), '{}'::bigint[], 'and r2 still waits');

-- ---------------------------------------------------------------------------
-- Only running runs count: a queued run, claimable or not, holds no slot;
-- every way back into the queue waits for a slot
-- ---------------------------------------------------------------------------
-- A run of a class no worker claims now holds no slot of its tenant: ca1 of
-- class 2491, then cb1 of class 2490, tenant lp-cls (limit 1).
SELECT runq.set_limit('tenant', 'lp-cls', 1) AS _ \gset
SELECT pg_temp.run('lp-cls', 2491) AS ca1, pg_temp.run('lp-cls', 2490) AS cb1 \gset
SELECT is(pg_temp.claim(ARRAY[2490], 5), ARRAY[:cb1]::bigint[],
          'lp-cls runs nothing: a claim of class 2490 takes cb1, though ca1 of class 2491, older, is queued');
SELECT is(pg_temp.claim(ARRAY[2491], 5), '{}'::bigint[], 'then lp-cls runs 1: ca1 waits');
-- Nor does a run of a kind no worker claims now: ka1 of kind lp-ka, then kb1
-- of kind lp-kb, class 2492, tenant lp-kds (limit 1).
SELECT runq.set_limit('tenant', 'lp-kds', 1) AS _ \gset
SELECT pg_temp.run('lp-kds', 2492, 'lp-ka') AS ka1, pg_temp.run('lp-kds', 2492, 'lp-kb') AS kb1 \gset
SELECT is(pg_temp.claim(ARRAY[2492], 5, ARRAY['lp-kb']), ARRAY[:kb1]::bigint[],
          'lp-kds runs nothing: a claim of kind lp-kb takes kb1, though ka1 of kind lp-ka, older, is queued');
SELECT is(pg_temp.claim(ARRAY[2492], 5), '{}'::bigint[], 'then lp-kds runs 1: ka1 waits');

-- A queued run cancelled: cq1 cq2 cq3 of lp-cq (limit 2), class 2493.
SELECT runq.set_limit('tenant', 'lp-cq', 2) AS _ \gset
SELECT pg_temp.run('lp-cq', 2493) AS cq1, pg_temp.run('lp-cq', 2493) AS cq2, pg_temp.run('lp-cq', 2493) AS cq3 \gset
SELECT is(pg_temp.claim(ARRAY[2493], 1), ARRAY[:cq1]::bigint[], 'lp-cq, limit 2: cq1 claimed, one at a time');
SELECT ok(runq.cancel(:cq2) IS NOT NULL, 'cq2, queued, is cancelled');
SELECT is(pg_temp.claim(ARRAY[2493], 5), ARRAY[:cq3]::bigint[], 'lp-cq runs 1, under 2: cq3');
SELECT is(pg_temp.claim(ARRAY[2493], 5), '{}'::bigint[], 'and nothing more');

-- A redriven run needs a slot: rd1 rd2 of lp-rd (limit 1), class 2494.
SELECT runq.set_limit('tenant', 'lp-rd', 1) AS _ \gset
SELECT pg_temp.run('lp-rd', 2494) AS rd1, pg_temp.run('lp-rd', 2494) AS rd2 \gset
SELECT is(pg_temp.claim(ARRAY[2494], 5), ARRAY[:rd1]::bigint[], 'lp-rd, limit 1: rd1');
SELECT is(runq.fail(:rd1, 1, '{"code": "lp_failed"}'), true, 'rd1 fails');
SELECT is(pg_temp.claim(ARRAY[2494], 5), ARRAY[:rd2]::bigint[], 'rd2 takes the slot');
SELECT is(runq.redrive(:rd1), true, 'rd1 is redriven');
SELECT is(pg_temp.claim(ARRAY[2494], 5), '{}'::bigint[], 'the redriven run waits for a slot: none while rd2 runs');
SELECT is(pg_temp.done(:rd2), true, 'rd2 completes');
SELECT is(pg_temp.claim(ARRAY[2494], 5), ARRAY[:rd1]::bigint[], 'then rd1');

-- An answer submitted to a waiting session needs a slot: ws1 (session
-- lp-sess) and ws2 of lp-ws (limit 1), class 2495.
SELECT runq.set_limit('tenant', 'lp-ws', 1) AS _ \gset
SELECT run_id AS ws1 FROM runq.submit(tenant_id => 'lp-ws', kind => 'lp-work', session_id => 'lp-sess',
                                      priority => 2495) \gset
SELECT pg_temp.run('lp-ws', 2495) AS ws2 \gset
SELECT is(pg_temp.claim(ARRAY[2495], 5), ARRAY[:ws1]::bigint[], 'lp-ws, limit 1: ws1');
SELECT is(runq.ask_user(:ws1, 1, '{"q": "go on?"}'), true, 'ws1 asks the user');
SELECT is(pg_temp.claim(ARRAY[2495], 5), ARRAY[:ws2]::bigint[], 'ws2 takes the slot');
SELECT is((SELECT s.outcome FROM runq.submit(tenant_id => 'lp-ws', kind => 'lp-work', payload => '{"a": "yes"}',
                                             session_id => 'lp-sess', priority => 2495) AS s),
          'input_delivered', 'the user answers by a submit to the session');
SELECT is(pg_temp.claim(ARRAY[2495], 5), '{}'::bigint[], 'ws1, queued again, waits for a slot: none while ws2 runs');
SELECT is(pg_temp.done(:ws2), true, 'ws2 completes');
SELECT is(pg_temp.claim(ARRAY[2495], 5), ARRAY[:ws1]::bigint[], 'then ws1');

-- ---------------------------------------------------------------------------
-- Kind limits, alone and with tenant limits
-- ---------------------------------------------------------------------------
SELECT lives_ok($$SELECT runq.set_limit('kind', NULL, 1)$$, 'set_limit(''kind'', NULL, 1): the default of every kind');
SELECT lives_ok($$SELECT runq.set_limit('kind', 'lp-kx', 2)$$, 'kind lp-kx may run 2');
-- Class 2430, in this order: x1 (lp-k1) x2 (lp-k2) of kind lp-kx, y1 (lp-k1)
-- of lp-ky, x3 (lp-k3) of lp-kx, y2 (lp-k2) of lp-ky.
SELECT pg_temp.run('lp-k1', 2430, 'lp-kx') AS x1, pg_temp.run('lp-k2', 2430, 'lp-kx') AS x2,
       pg_temp.run('lp-k1', 2430, 'lp-ky') AS y1, pg_temp.run('lp-k3', 2430, 'lp-kx') AS x3,
       pg_temp.run('lp-k2', 2430, 'lp-ky') AS y2 \gset
SELECT is(pg_temp.claim(ARRAY[2430], 5), ARRAY[:x1, :x2, :y1]::bigint[],
          'a kind limit spans tenants: lp-kx up to its 2 (x3 passed over, though lp-k3 runs nothing), lp-ky up to the kind default 1 (y2 passed over)');
SELECT is(pg_temp.limits('kind'), 'kind NULL 1 NULL; kind lp-kx 2 2', 'runq.limits: kind lp-kx runs 2; the default row NULL');
SELECT is(pg_temp.done(:x1), true, 'x1 completes');
SELECT is(pg_temp.claim(ARRAY[2430], 5), ARRAY[:x3]::bigint[], 'its slot of lp-kx goes to x3; y2 still waits for lp-ky');
SELECT is(pg_temp.done(:y1), true, 'y1 completes');
SELECT is(pg_temp.claim(ARRAY[2430], 5), ARRAY[:y2]::bigint[], 'then y2');
SELECT lives_ok($$SELECT runq.set_limit('kind', NULL, NULL)$$, 'the kind default removed');

-- Both at once, class 2431: z1 z2 (lp-t1, limit 1) z3 (lp-t2) z4 (lp-t3), all
-- of kind lp-kz (limit 2), then v1 (lp-t1) of kind lp-kv (no limit).
SELECT runq.set_limit('kind', 'lp-kz', 2) AS _ \gset
SELECT runq.set_limit('tenant', 'lp-t1', 1) AS _ \gset
SELECT pg_temp.run('lp-t1', 2431, 'lp-kz') AS z1, pg_temp.run('lp-t1', 2431, 'lp-kz') AS z2,
       pg_temp.run('lp-t2', 2431, 'lp-kz') AS z3, pg_temp.run('lp-t3', 2431, 'lp-kz') AS z4,
       pg_temp.run('lp-t1', 2431, 'lp-kv') AS v1 \gset
SELECT is(pg_temp.claim(ARRAY[2431], 5), ARRAY[:z1, :z3]::bigint[],
          'both limits hold: z1 and z3; z2 and v1 wait for tenant lp-t1 (1), z4 for kind lp-kz (2)');
SELECT is(pg_temp.done(:z1), true, 'z1 completes');
SELECT is(pg_temp.claim(ARRAY[2431], 5), ARRAY[:z2]::bigint[],
          'z2, the oldest waiting, takes the slots z1 freed; then lp-t1 and lp-kz are full again (v1, z4 wait)');
SELECT is(pg_temp.done(:z3), true, 'z3 completes');
SELECT is(pg_temp.claim(ARRAY[2431], 5), ARRAY[:z4]::bigint[], 'z3 freed a slot of lp-kz: z4');
SELECT is(pg_temp.done(:z2), true, 'z2 completes');
SELECT is(pg_temp.claim(ARRAY[2431], 5), ARRAY[:v1]::bigint[], 'z2 freed lp-t1: v1');
SELECT is(pg_temp.limits('kind'), 'kind lp-kx 2 2; kind lp-kz 2 1', 'runq.limits: kind lp-kz runs 1 (z4), lp-kx 2 (x2, x3)');
SELECT pg_temp.run('lp-t2', 2431, 'lp-kz') AS z5, pg_temp.run('lp-t3', 2431, 'lp-kz') AS z6 \gset
SELECT is(pg_temp.claim(ARRAY[2431], 5, ARRAY['lp-kz']), ARRAY[:z5]::bigint[],
          'a claim by kind honours the kind limit: the one slot left of lp-kz, to z5');
SELECT is(pg_temp.claim(ARRAY[2431], 5, ARRAY['lp-kz', 'lp-kv']), '{}'::bigint[], 'and z6 waits');

-- A run waiting for its tenant holds no slot of its kind, class 2432: rb0
-- (lp-rb, limit 1, of another kind), i1 (lp-ra) i2 (lp-rb) i3 (lp-rc) of kind
-- lp-kr (limit 1).
SELECT runq.set_limit('kind', 'lp-kr', 1) AS _ \gset
SELECT runq.set_limit('tenant', 'lp-rb', 1) AS _ \gset
SELECT pg_temp.run('lp-rb', 2432, 'lp-other') AS rb0, pg_temp.run('lp-ra', 2432, 'lp-kr') AS i1,
       pg_temp.run('lp-rb', 2432, 'lp-kr') AS i2, pg_temp.run('lp-rc', 2432, 'lp-kr') AS i3 \gset
SELECT is(pg_temp.claim(ARRAY[2432], 5), ARRAY[:rb0, :i1]::bigint[], 'rb0 fills lp-rb, i1 fills lp-kr');
SELECT is(pg_temp.done(:i1), true, 'i1 completes');
SELECT is(pg_temp.claim(ARRAY[2432], 5), ARRAY[:i3]::bigint[],
          'the slot of lp-kr goes to i3: i2, older, waits for its tenant and holds no slot of its kind');
SELECT is(pg_temp.done(:i3), true, 'i3 completes');
SELECT is(pg_temp.done(:rb0), true, 'rb0 completes');
SELECT is(pg_temp.claim(ARRAY[2432], 5), ARRAY[:i2]::bigint[], 'then i2');
SELECT lives_ok($$SELECT runq.set_limit('kind', 'lp-kz', NULL)$$, 'kind lp-kz''s row removed');
SELECT is(pg_temp.limits('kind'), 'kind lp-kr 1 1; kind lp-kx 2 2',
          'runq.limits: the kind rows left, each with its count');

-- ---------------------------------------------------------------------------
-- Lowering, raising and removing a limit
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'lp-low', 3) AS _ \gset
SELECT pg_temp.run('lp-low', 2440) AS l1, pg_temp.run('lp-low', 2440) AS l2, pg_temp.run('lp-low', 2440) AS l3,
       pg_temp.run('lp-low', 2440) AS l4, pg_temp.run('lp-low', 2440) AS l5, pg_temp.run('lp-low', 2440) AS l6,
       pg_temp.run('lp-low', 2440) AS l7 \gset
SELECT is(pg_temp.claim(ARRAY[2440], 5), ARRAY[:l1, :l2, :l3]::bigint[], 'lp-low, limit 3: l1, l2, l3');
CREATE TEMP TABLE low_before ON COMMIT DROP AS
SELECT json_agg(r ORDER BY r.run_id)::text AS s FROM runq.runs AS r WHERE r.run_id IN (:l1, :l2, :l3);
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-low', 1)$$, 'lp-low''s limit lowered to 1, below the 3 it runs');
SELECT is(pg_temp.limits('tenant') ~ '(^|; )tenant lp-low 1 3(;|$)', true, 'runq.limits: lp-low, max_running 1, running 3');
SELECT is((SELECT json_agg(r ORDER BY r.run_id)::text FROM runq.runs AS r WHERE r.run_id IN (:l1, :l2, :l3)),
          (SELECT s FROM low_before), 'the three running runs are untouched');
SELECT is(runq.heartbeat(:l1, 1), true, 'and go on: l1 heartbeats');
SELECT is(pg_temp.claim(ARRAY[2440], 5), '{}'::bigint[], 'no new claim for lp-low');
SELECT is(pg_temp.done(:l1), true, 'l1 completes');
SELECT is(pg_temp.claim(ARRAY[2440], 5), '{}'::bigint[], 'lp-low runs 2, not under 1: no claim');
SELECT is(pg_temp.done(:l2), true, 'l2 completes');
SELECT is(pg_temp.claim(ARRAY[2440], 5), '{}'::bigint[], 'lp-low runs 1, not under 1: no claim');
SELECT is(pg_temp.done(:l3), true, 'l3 completes');
SELECT is(pg_temp.claim(ARRAY[2440], 5), ARRAY[:l4]::bigint[], 'lp-low runs 0, under 1: claims resume, with l4');
SELECT is(pg_temp.claim(ARRAY[2440], 5), '{}'::bigint[], 'and only one');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-low', 3)$$, 'lp-low''s limit raised to 3');
SELECT is(pg_temp.claim(ARRAY[2440], 5), ARRAY[:l5, :l6]::bigint[],
          'raising the limit makes the waiting runs claimable at once: l5 and l6');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-low', NULL)$$, 'lp-low''s row removed');
SELECT is(pg_temp.claim(ARRAY[2440], 5), '{}'::bigint[],
          'without its row lp-low has the default 2, and runs 3: no claim');
SELECT is(pg_temp.done(:l4), true, 'l4 completes');
SELECT is(pg_temp.done(:l5), true, 'l5 completes');
SELECT is(pg_temp.claim(ARRAY[2440], 5), ARRAY[:l7]::bigint[], 'lp-low runs 1, under the default 2: l7');

-- Lowered, then raised back before any run finished, class 2445: the raise
-- undoes the lowering, and a run that completes hands its slot on.
SELECT runq.set_limit('tenant', 'lp-back', 3) AS _ \gset
SELECT pg_temp.run('lp-back', 2445) AS bk1, pg_temp.run('lp-back', 2445) AS bk2, pg_temp.run('lp-back', 2445) AS bk3,
       pg_temp.run('lp-back', 2445) AS bk4, pg_temp.run('lp-back', 2445) AS bk5 \gset
SELECT is(pg_temp.claim(ARRAY[2445], 5), ARRAY[:bk1, :bk2, :bk3]::bigint[], 'lp-back, limit 3: bk1, bk2, bk3');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-back', 1)$$, 'lp-back lowered to 1');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-back', 3)$$, 'and raised back to 3');
SELECT is(pg_temp.claim(ARRAY[2445], 5), '{}'::bigint[], 'lp-back runs 3, its limit: no claim');
SELECT is(pg_temp.done(:bk1), true, 'bk1 completes');
SELECT is(pg_temp.claim(ARRAY[2445], 5), ARRAY[:bk4]::bigint[], 'lp-back runs 2, under 3: bk4 at once');

-- The default raised and lowered, class 2444: every tenant without a row
-- follows it. da1 da2 da3 (lp-da) db1 db2 db3 (lp-db).
SELECT pg_temp.run('lp-da', 2444) AS da1, pg_temp.run('lp-da', 2444) AS da2, pg_temp.run('lp-da', 2444) AS da3,
       pg_temp.run('lp-db', 2444) AS db1, pg_temp.run('lp-db', 2444) AS db2, pg_temp.run('lp-db', 2444) AS db3 \gset
SELECT is(pg_temp.claim(ARRAY[2444], 10), ARRAY[:da1, :da2, :db1, :db2]::bigint[],
          'the default 2: two runs of lp-da, two of lp-db');
SELECT lives_ok($$SELECT runq.set_limit('tenant', NULL, 3)$$, 'the tenant default raised to 3');
SELECT is(pg_temp.claim(ARRAY[2444], 10), ARRAY[:da3, :db3]::bigint[],
          'raising the default makes a waiting run of each tenant claimable at once: da3, db3');
SELECT pg_temp.run('lp-da', 2444) AS da4, pg_temp.run('lp-db', 2444) AS db4 \gset
SELECT lives_ok($$SELECT runq.set_limit('tenant', NULL, 2)$$, 'the default lowered to 2, below the 3 each runs');
SELECT is(pg_temp.done(:da1), true, 'da1 completes');
SELECT is(pg_temp.done(:db1), true, 'db1 completes');
SELECT is(pg_temp.claim(ARRAY[2444], 10), '{}'::bigint[], 'each runs 2, not under the default 2: no claim');
SELECT is(pg_temp.done(:da2), true, 'da2 completes');
SELECT is(pg_temp.claim(ARRAY[2444], 10), ARRAY[:da4]::bigint[], 'lp-da runs 1, under 2: da4; db4 still waits');

-- Removing the default and the row: no limit at all, class 2441.
SELECT runq.set_limit('tenant', 'lp-free', 1) AS _ \gset
SELECT pg_temp.run('lp-free', 2441) AS g1, pg_temp.run('lp-free', 2441) AS g2, pg_temp.run('lp-free', 2441) AS g3,
       pg_temp.run('lp-free', 2441) AS g4 \gset
SELECT is(pg_temp.claim(ARRAY[2441], 5), ARRAY[:g1]::bigint[], 'lp-free, limit 1: g1');
SELECT lives_ok($$SELECT runq.set_limit('tenant', NULL, NULL)$$, 'the tenant default removed');
SELECT is(pg_temp.claim(ARRAY[2441], 5), '{}'::bigint[], 'lp-free''s own row still holds');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-free', NULL)$$, 'lp-free''s row removed');
SELECT is(pg_temp.claim(ARRAY[2441], 5), ARRAY[:g2, :g3, :g4]::bigint[],
          'no row and no default: no limit, the waiting runs claimable at once');
SELECT is(pg_temp.limits('tenant') ~ 'tenant (NULL|lp-free) ', false, 'runq.limits has neither row');

-- A limit set while runs are queued holds them too, class 2442.
SELECT pg_temp.run('lp-m', 2442) AS m1, pg_temp.run('lp-m', 2442) AS m2, pg_temp.run('lp-m', 2442) AS m3 \gset
SELECT is(pg_temp.claim(ARRAY[2442], 1), ARRAY[:m1]::bigint[], 'lp-m, no limit: m1');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-m', 1)$$, 'lp-m gets a limit of 1 while m2 and m3 are queued');
SELECT is(pg_temp.claim(ARRAY[2442], 5), '{}'::bigint[], 'the runs queued before the limit are held to it');
SELECT is(pg_temp.done(:m1), true, 'm1 completes');
SELECT is(pg_temp.claim(ARRAY[2442], 5), ARRAY[:m2]::bigint[], 'then m2 alone');

-- A kind limit lowered, class 2443.
SELECT runq.set_limit('kind', 'lp-kl', 2) AS _ \gset
SELECT pg_temp.run('lp-n1', 2443, 'lp-kl') AS n1, pg_temp.run('lp-n2', 2443, 'lp-kl') AS n2,
       pg_temp.run('lp-n3', 2443, 'lp-kl') AS n3 \gset
SELECT is(pg_temp.claim(ARRAY[2443], 5), ARRAY[:n1, :n2]::bigint[], 'kind lp-kl, limit 2: n1 and n2');
SELECT lives_ok($$SELECT runq.set_limit('kind', 'lp-kl', 1)$$, 'kind lp-kl lowered to 1');
SELECT is(pg_temp.done(:n1), true, 'n1 completes');
SELECT is(pg_temp.claim(ARRAY[2443], 5), '{}'::bigint[], 'lp-kl runs 1, not under 1: n3 waits');
SELECT is(pg_temp.done(:n2), true, 'n2 completes');
SELECT is(pg_temp.claim(ARRAY[2443], 5), ARRAY[:n3]::bigint[], 'then n3');

-- ---------------------------------------------------------------------------
-- A run scheduled for later under a limit
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'lp-sa', 2) AS _ \gset
SELECT runq.set_limit('tenant', 'lp-sb', 1) AS _ \gset
SELECT pg_temp.run('lp-sb', 2450) AS sb0 \gset
SELECT is(pg_temp.claim(ARRAY[2450], 5), ARRAY[:sb0]::bigint[], 'lp-sb, limit 1: sb0');
SELECT pg_temp.run('lp-sa', 2450, p_at => clock_timestamp() + interval '200 milliseconds') AS sa1,
       pg_temp.run('lp-sb', 2450, p_at => clock_timestamp() + interval '200 milliseconds') AS sb1 \gset
SELECT is(pg_temp.claim(ARRAY[2450], 5), '{}'::bigint[], 'sa1 and sb1, scheduled for later, are not claimed before their time');
DO $$ BEGIN PERFORM pg_sleep(0.3); END $$;
SELECT count(*) AS swept FROM runq.sweep() \gset
SELECT is(pg_temp.claim(ARRAY[2450], 5), ARRAY[:sa1]::bigint[],
          'once due, after a sweep: sa1, whose tenant has room; not sb1, whose tenant is at its limit');
SELECT is(pg_temp.statuses(ARRAY[:sb1]), 'queued', 'sb1 is queued');
SELECT is(pg_temp.done(:sb0), true, 'sb0 completes');
SELECT is(pg_temp.claim(ARRAY[2450], 5), ARRAY[:sb1]::bigint[], 'then sb1');

-- ---------------------------------------------------------------------------
-- Pause and resume of a class
-- ---------------------------------------------------------------------------
-- q1 q2 of class 2460, p1 of class 2461.
SELECT pg_temp.run('lp-p', 2460) AS q1, pg_temp.run('lp-p', 2460) AS q2, pg_temp.run('lp-p', 2461) AS p1 \gset
SELECT is(pg_temp.claim(ARRAY[2460], 1), ARRAY[:q1]::bigint[], 'q1 is claimed before the pause');
SELECT is(runq.pause('class', '2460', 'maintenance'), true, 'pause(''class'', ''2460'', ...): true, it paused');
SELECT is(pg_temp.pauses(), 'class 2460 maintenance', 'runq.pauses: the scope, the class as text, the reason');
SELECT ok((SELECT p.paused_at BETWEEN now() AND clock_timestamp() FROM runq.pauses AS p
            WHERE p.scope = 'class' AND p.key = '2460'), 'paused_at is the time of the pause');
SELECT is(runq.pause('class', '2460', 'again'), false, 'pausing it again: false');
SELECT is((SELECT count(*)::int FROM runq.pauses AS p WHERE p.scope = 'class' AND p.key = '2460'), 1,
          'and still one row');
SELECT is(pg_temp.claim(ARRAY[2460, 2461], 5), ARRAY[:p1]::bigint[],
          'a claim of both classes passes over q2 of the paused class, though of a lower class, and takes p1');
SELECT is(pg_temp.claim(ARRAY[2460], 5, ARRAY['lp-work']), '{}'::bigint[],
          'a claim by kind takes nothing of the paused class either');
SELECT is(runq.heartbeat(:q1, 1), true, 'q1, running, still heartbeats');
SELECT run_id AS q3, outcome AS q3_outcome FROM runq.submit(tenant_id => 'lp-p', kind => 'lp-work', priority => 2460) \gset
SELECT is(:'q3_outcome'::text, 'created', 'submit still accepts a run of the paused class');
SELECT is(pg_temp.statuses(ARRAY[:q2, :q3]), 'queued queued', 'q2 and q3 are queued');
SELECT is(pg_temp.claim(ARRAY[2460], 5), '{}'::bigint[], 'and not claimed');
SELECT is(runq.complete(:q1, 1), true, 'q1 still completes');
SELECT is(pg_temp.statuses(ARRAY[:q1]), 'succeeded', 'q1 succeeded');
SELECT is(runq.resume('kind', '2460'), false, 'resume of the key under another scope: false');
SELECT is(runq.resume('class', '2460'), true, 'resume(''class'', ''2460''): true, it resumed');
SELECT is(runq.resume('class', '2460'), false, 'resume of what is not paused: false');
SELECT is(pg_temp.pauses(), '', 'the pause is gone from runq.pauses');
SELECT is(pg_temp.claim(ARRAY[2460], 5), ARRAY[:q2, :q3]::bigint[], 'q2 and q3 claimable at once, in their order');

-- ---------------------------------------------------------------------------
-- Pause and resume of a kind
-- ---------------------------------------------------------------------------
-- k1 k2 of kind lp-pk, o1 of lp-work, one tenant, class 2462.
SELECT pg_temp.run('lp-pk-t', 2462, 'lp-pk') AS k1, pg_temp.run('lp-pk-t', 2462, 'lp-pk') AS k2,
       pg_temp.run('lp-pk-t', 2462) AS o1 \gset
SELECT is(pg_temp.claim(ARRAY[2462], 1), ARRAY[:k1]::bigint[], 'k1 is claimed before the pause');
SELECT is(runq.pause('kind', 'lp-pk'), true, 'pause(''kind'', ''lp-pk''), the reason left out: true');
SELECT is(pg_temp.pauses(), 'kind lp-pk NULL', 'runq.pauses: the kind, with no reason');
SELECT is(pg_temp.claim(ARRAY[2462], 5), ARRAY[:o1]::bigint[],
          'k2, of the paused kind, is passed over; o1, of the same tenant and class, is claimed');
SELECT is(pg_temp.claim(ARRAY[2462], 5, ARRAY['lp-pk']), '{}'::bigint[], 'a claim of that kind takes nothing');
SELECT is(runq.heartbeat(:k1, 1), true, 'k1, running, still heartbeats');
SELECT run_id AS k3 FROM runq.submit(tenant_id => 'lp-pk-t', kind => 'lp-pk', priority => 2462) \gset
SELECT is(pg_temp.statuses(ARRAY[:k2, :k3]), 'queued queued', 'submit still accepts a run of the paused kind: k3 queued, as k2');
SELECT is(runq.complete(:k1, 1), true, 'k1 still completes');
SELECT is(runq.resume('tenant', 'lp-pk'), false, 'resume of the key under another scope: false');
SELECT is(pg_temp.claim(ARRAY[2462], 5), '{}'::bigint[], 'and the kind is still paused');
SELECT is(runq.resume('kind', 'lp-pk'), true, 'resume(''kind'', ''lp-pk''): true');
SELECT is(pg_temp.claim(ARRAY[2462], 5), ARRAY[:k2, :k3]::bigint[], 'k2 and k3 at once, in their order');
SELECT is(pg_temp.pauses(), '', 'no pause left');

-- ---------------------------------------------------------------------------
-- Pause and resume of a tenant; pauses with limits
-- ---------------------------------------------------------------------------
-- t1 (lp-pt) u1 (lp-pu) t2 (lp-pt) u2 (lp-pu), class 2463.
SELECT pg_temp.run('lp-pt', 2463) AS t1, pg_temp.run('lp-pu', 2463) AS u1, pg_temp.run('lp-pt', 2463) AS t2,
       pg_temp.run('lp-pu', 2463) AS u2 \gset
SELECT is(pg_temp.claim(ARRAY[2463], 1), ARRAY[:t1]::bigint[], 't1 is claimed before the pause');
SELECT is(runq.pause('tenant', 'lp-pt', 'over quota'), true, 'pause(''tenant'', ''lp-pt'', ...): true');
SELECT is(pg_temp.pauses(), 'tenant lp-pt over quota', 'runq.pauses: the tenant and the reason');
SELECT is(pg_temp.claim(ARRAY[2463], 1), ARRAY[:u1]::bigint[], 'the next claim passes over t2 of the paused tenant: u1');
SELECT run_id AS t3 FROM runq.submit(tenant_id => 'lp-pt', kind => 'lp-work', priority => 2463) \gset
SELECT pg_temp.run('lp-pu', 2463) AS u3 \gset
SELECT is(pg_temp.statuses(ARRAY[:t2, :t3]), 'queued queued', 'submit still accepts a run of the paused tenant: t3 queued, as t2');
SELECT is(runq.heartbeat(:t1, 1), true, 't1, running, still heartbeats');
SELECT is(runq.complete(:t1, 1), true, 't1 still completes');
SELECT is(pg_temp.claim(ARRAY[2463], 1, ARRAY['lp-work']), ARRAY[:u2]::bigint[],
          'a claim by kind passes over the paused tenant too: u2');
SELECT is(runq.resume('tenant', 'lp-pt'), true, 'resume(''tenant'', ''lp-pt''): true');
SELECT is(pg_temp.claim(ARRAY[2463], 5), ARRAY[:t2, :t3, :u3]::bigint[],
          'at once; t2 and t3 kept their place, ahead of u3, newer');

-- A slot freed while the tenant is paused, class 2464.
SELECT runq.set_limit('tenant', 'lp-pl', 1) AS _ \gset
SELECT pg_temp.run('lp-pl', 2464) AS h1, pg_temp.run('lp-pl', 2464) AS h2, pg_temp.run('lp-pl', 2464) AS h3 \gset
SELECT is(pg_temp.claim(ARRAY[2464], 5), ARRAY[:h1]::bigint[], 'lp-pl, limit 1: h1');
SELECT is(runq.pause('tenant', 'lp-pl'), true, 'lp-pl is paused');
SELECT is(pg_temp.done(:h1), true, 'h1 completes, freeing lp-pl''s slot');
SELECT is(pg_temp.claim(ARRAY[2464], 5), '{}'::bigint[], 'the free slot is not used while the tenant is paused');
SELECT is(runq.resume('tenant', 'lp-pl'), true, 'lp-pl is resumed');
SELECT is(pg_temp.claim(ARRAY[2464], 5), ARRAY[:h2]::bigint[], 'h2 at once, and only h2: the limit still holds');

-- A paused run holds no slot of its kind, class 2465: j1 (lp-qa) j2 (lp-qb)
-- j3 (lp-qc) of kind lp-kq (limit 1).
SELECT runq.set_limit('kind', 'lp-kq', 1) AS _ \gset
SELECT pg_temp.run('lp-qa', 2465, 'lp-kq') AS j1, pg_temp.run('lp-qb', 2465, 'lp-kq') AS j2,
       pg_temp.run('lp-qc', 2465, 'lp-kq') AS j3 \gset
SELECT is(pg_temp.claim(ARRAY[2465], 5), ARRAY[:j1]::bigint[], 'kind lp-kq, limit 1: j1');
SELECT is(runq.pause('tenant', 'lp-qb'), true, 'j2''s tenant is paused');
SELECT is(pg_temp.done(:j1), true, 'j1 completes');
SELECT is(pg_temp.claim(ARRAY[2465], 5), ARRAY[:j3]::bigint[],
          'the free slot of lp-kq goes to j3: j2, older, is paused and blocks no one');
SELECT is(runq.resume('tenant', 'lp-qb'), true, 'j2''s tenant is resumed');
SELECT is(pg_temp.claim(ARRAY[2465], 5), '{}'::bigint[], 'j2 waits for the slot of its kind');
SELECT is(pg_temp.done(:j3), true, 'j3 completes');
SELECT is(pg_temp.claim(ARRAY[2465], 5), ARRAY[:j2]::bigint[], 'then j2');

-- ---------------------------------------------------------------------------
-- Pause of a schedule; every scope in runq.pauses; class keys 0 and 32767
-- ---------------------------------------------------------------------------
SELECT is(runq.pause('schedule', 'lp-nightly', 'deploy'), true, 'pause(''schedule'', ''lp-nightly'', ...): true');
SELECT is(runq.pause('schedule', 'lp-nightly'), false, 'pausing it again: false');
SELECT pg_temp.run('lp-nightly', 2466, 'lp-nightly') AS sn \gset
SELECT is(pg_temp.claim(ARRAY[2466], 5), ARRAY[:sn]::bigint[],
          'a paused schedule pauses no tenant or kind of its name: their run is claimed');
SELECT is(runq.pause('class', '2499', 'c'), true, 'class 2499 paused');
SELECT is(runq.pause('kind', 'lp-view', NULL), true, 'kind lp-view paused, reason NULL');
SELECT is(runq.pause('tenant', 'lp-view', 't'), true, 'tenant lp-view paused, a key shared with a kind');
SELECT is(pg_temp.pauses(), 'class 2499 c; kind lp-view NULL; schedule lp-nightly deploy; tenant lp-view t',
          'runq.pauses: one row per pause, each scope with its key and reason');
SELECT is((SELECT count(*)::int FROM runq.pauses AS p
            WHERE (p.key LIKE 'lp-%' OR p.key = '2499') AND p.paused_at BETWEEN now() AND clock_timestamp()), 4,
          'each with its paused_at');
SELECT is(runq.resume('schedule', 'lp-nightly'), true, 'resume of the schedule: true');
SELECT is(runq.resume('schedule', 'lp-nightly'), false, 'again: false');
SELECT is(runq.resume('class', '2499'), true, 'class 2499 resumed');
SELECT is(runq.resume('kind', 'lp-view'), true, 'kind lp-view resumed');
SELECT is(runq.resume('tenant', 'lp-view'), true, 'tenant lp-view resumed');
SELECT is(pg_temp.pauses(), '', 'no row left in runq.pauses');
SELECT is(runq.pause('class', '0'), true, 'class 0, the lowest, can be paused');
SELECT is(runq.pause('class', '32767'), true, 'class 32767, the highest, can be paused');
SELECT is(pg_temp.pauses(), 'class 0 NULL; class 32767 NULL', 'runq.pauses: class keys 0 and 32767');
SELECT is(runq.resume('class', '0'), true, 'class 0 resumed');
SELECT is(runq.resume('class', '32767'), true, 'class 32767 resumed');
SELECT is(pg_temp.pauses(), '', 'and gone');
-- A class key written with a leading zero names the same class, or is
-- refused: it never pauses only part of the class. zc1 queued before it, zc2
-- after, class 2480.
SELECT pg_temp.run('lp-zero', 2480) AS zc1 \gset
SELECT pg_temp.outcome($$SELECT runq.pause('class', '02480')$$) AS zero_pause \gset
SELECT pg_temp.run('lp-zero', 2480) AS zc2 \gset
SELECT ok(:'zero_pause' ~ '^22023 ' OR pg_temp.claim(ARRAY[2480], 5) = '{}'::bigint[],
          'pause(''class'', ''02480'') is refused with 22023, or pauses class 2480: neither zc1, queued before it, nor zc2, after, is claimed');
SELECT pg_temp.outcome($$SELECT runq.resume('class', '02480')$$) AS zero_resume \gset
SELECT is(pg_temp.claim(ARRAY[2480], 5), ARRAY[:zc1, :zc2]::bigint[],
          'after resume(''class'', ''02480'') (or no pause at all) both are claimable, in their order');

-- ---------------------------------------------------------------------------
-- Bad arguments: 22023 naming the value, and nothing changes
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'lp-e', 2) AS _ \gset
SELECT runq.pause('tenant', 'lp-e', 'held') AS _ \gset
SELECT pg_temp.run('lp-e', 2470) AS er1, pg_temp.run('lp-e', 2470) AS er2 \gset
SELECT is(pg_temp.claim(ARRAY[2470], 5), '{}'::bigint[], 'lp-e is paused: nothing claimed');
CREATE TEMP TABLE before ON COMMIT DROP AS SELECT pg_temp.state() AS s;

SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('queue', 'lp-e', 1)$$), '^22023 .*scope.*queue',
               'set_limit of scope queue: 22023 naming scope and the value');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('class', '2470', 1)$$), '^22023 .*scope.*class',
               'set_limit of scope class, a scope of pause only: 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('schedule', 'lp-e', 1)$$), '^22023 .*scope.*schedule',
               'set_limit of scope schedule: 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('Tenant', 'lp-e', 1)$$), '^22023 .*scope.*Tenant',
               'set_limit of scope Tenant (scopes match exactly): 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit(NULL, 'lp-e', 1)$$), '^22023 .*scope.*NULL',
               'set_limit of scope NULL: 22023 naming NULL');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('tenant', 'lp-e', 0)$$), '^22023 .*max_running.*\m0\M',
               'set_limit with max_running 0: 22023 naming max_running and 0');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('tenant', 'lp-e', -1)$$), '^22023 .*max_running.*-1',
               'set_limit with max_running -1: 22023 naming -1');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('kind', 'lp-e', '-2147483648'::integer)$$),
               '^22023 .*max_running.*-2147483648', 'set_limit of a kind with the lowest integer: 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('tenant', NULL, 0)$$), '^22023 .*max_running.*\m0\M',
               'set_limit of the default with max_running 0: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.set_limit('kind', NULL, -5)$$), '^22023 .*max_running.*-5',
               'set_limit of the kind default with max_running -5: 22023 naming -5');
SELECT is(pg_temp.state(), (SELECT s FROM before), 'the rejected set_limit calls changed nothing');

SELECT matches(pg_temp.outcome($$SELECT runq.pause('bogus', 'lp-e')$$), '^22023 .*scope.*bogus',
               'pause of scope bogus: 22023 naming scope and the value');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('Class', '2470')$$), '^22023 .*scope.*Class',
               'pause of scope Class (scopes match exactly): 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.pause(NULL, 'lp-e', 'r')$$), '^22023 .*scope.*NULL',
               'pause of scope NULL: 22023 naming NULL');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('tenant', NULL)$$), '^22023 .*key.*NULL',
               'pause of tenant NULL: 22023 naming key and NULL');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('kind', NULL, 'r')$$), '^22023 .*key.*NULL',
               'pause of kind NULL: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('class', NULL)$$), '^22023 .*key.*NULL',
               'pause of class NULL: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('schedule', NULL)$$), '^22023 .*key.*NULL',
               'pause of schedule NULL: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('class', 'abc')$$), '^22023 .*abc',
               'pause of class abc, not an integer: 22023 naming abc');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('class', '1.5')$$), '^22023 .*1\.5',
               'pause of class 1.5: 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('class', '')$$), '^22023 ',
               'pause of class '''', the empty string: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('class', '32768')$$), '^22023 .*32768',
               'pause of class 32768, above the highest class: 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('class', '-1')$$), '^22023 .*-1',
               'pause of class -1, below the lowest class: 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.pause('class', '99999999999')$$), '^22023 .*99999999999',
               'pause of class 99999999999, past any integer: 22023 (not an overflow) naming it');
SELECT is(pg_temp.state(), (SELECT s FROM before), 'the rejected pause calls changed nothing');

SELECT matches(pg_temp.outcome($$SELECT runq.resume('bogus', 'lp-e')$$), '^22023 .*scope.*bogus',
               'resume of scope bogus: 22023 naming scope and the value');
SELECT matches(pg_temp.outcome($$SELECT runq.resume(NULL, 'lp-e')$$), '^22023 .*scope.*NULL',
               'resume of scope NULL: 22023 naming NULL');
SELECT matches(pg_temp.outcome($$SELECT runq.resume('tenant', NULL)$$), '^22023 .*key.*NULL',
               'resume of tenant NULL: 22023 naming key and NULL');
SELECT matches(pg_temp.outcome($$SELECT runq.resume('kind', NULL)$$), '^22023 .*key.*NULL',
               'resume of kind NULL: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.resume('class', NULL)$$), '^22023 .*key.*NULL',
               'resume of class NULL: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.resume('schedule', NULL)$$), '^22023 .*key.*NULL',
               'resume of schedule NULL: 22023');
SELECT matches(pg_temp.outcome($$SELECT runq.resume('class', 'abc')$$), '^22023 .*abc',
               'resume of class abc: 22023 naming abc');
SELECT matches(pg_temp.outcome($$SELECT runq.resume('class', '32768')$$), '^22023 .*32768',
               'resume of class 32768: 22023 naming it');
SELECT matches(pg_temp.outcome($$SELECT runq.resume('class', '-1')$$), '^22023 .*-1',
               'resume of class -1: 22023 naming it');
SELECT is(pg_temp.state(), (SELECT s FROM before), 'the rejected resume calls changed nothing: lp-e is still paused');

-- The same errors as throws_ok reports them, with their SQLSTATE.
SELECT throws_ok($$SELECT runq.set_limit('queue', 'lp-e', 1)$$, '22023', NULL, 'set_limit of a bad scope raises 22023');
SELECT throws_ok($$SELECT runq.set_limit('tenant', 'lp-e', 0)$$, '22023', NULL, 'set_limit with max_running 0 raises 22023');
SELECT throws_ok($$SELECT runq.pause('tenant', NULL)$$, '22023', NULL, 'pause with key NULL raises 22023');
SELECT throws_ok($$SELECT runq.pause('class', 'x10')$$, '22023', NULL, 'pause of a class key that is no integer raises 22023');
SELECT throws_ok($$SELECT runq.resume('class', '40000')$$, '22023', NULL, 'resume of a class key out of range raises 22023');
SELECT is(pg_temp.state(), (SELECT s FROM before), 'and changed nothing');

-- ---------------------------------------------------------------------------
-- Privileges: runq_worker and runq_client are refused, runq_admin may
-- ---------------------------------------------------------------------------
SET ROLE runq_worker;
SELECT throws_ok($$SELECT runq.set_limit('tenant', 'lp-priv', 1)$$, '42501', NULL, 'runq_worker cannot set_limit');
SELECT throws_ok($$SELECT runq.pause('tenant', 'lp-priv')$$, '42501', NULL, 'runq_worker cannot pause');
SELECT throws_ok($$SELECT runq.resume('tenant', 'lp-e')$$, '42501', NULL, 'runq_worker cannot resume');
SELECT throws_ok('SELECT * FROM runq.limits', '42501', NULL, 'runq_worker cannot read runq.limits');
SELECT throws_ok('SELECT * FROM runq.pauses', '42501', NULL, 'runq_worker cannot read runq.pauses');
RESET ROLE;
SET ROLE runq_client;
SELECT throws_ok($$SELECT runq.set_limit('tenant', 'lp-priv', 1)$$, '42501', NULL, 'runq_client cannot set_limit');
SELECT throws_ok($$SELECT runq.pause('tenant', 'lp-priv')$$, '42501', NULL, 'runq_client cannot pause');
SELECT throws_ok($$SELECT runq.resume('tenant', 'lp-e')$$, '42501', NULL, 'runq_client cannot resume');
SELECT throws_ok('SELECT * FROM runq.limits', '42501', NULL, 'runq_client cannot read runq.limits');
SELECT throws_ok('SELECT * FROM runq.pauses', '42501', NULL, 'runq_client cannot read runq.pauses');
RESET ROLE;
SELECT is(pg_temp.state(), (SELECT s FROM before), 'the refused calls changed nothing');
SET ROLE runq_admin;
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'lp-priv', 1)$$, 'runq_admin can set_limit');
SELECT is(runq.pause('tenant', 'lp-priv', 'admin'), true, 'runq_admin can pause');
SELECT is(runq.resume('tenant', 'lp-priv'), true, 'runq_admin can resume');
SELECT is((SELECT l.max_running FROM runq.limits AS l WHERE l.scope = 'tenant' AND l.key = 'lp-priv'), 1,
          'runq_admin can read runq.limits');
SELECT is((SELECT p.reason FROM runq.pauses AS p WHERE p.scope = 'tenant' AND p.key = 'lp-e'), 'held',
          'runq_admin can read runq.pauses');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- One statement ending several runs hands each slot on once: complete_many of
-- a run of kind lp-f1a and one of lp-f1b (limit 1), with two runs of lp-f1b
-- parked behind tenant lp-f1's limit of 2, admits one of them, not both.
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'lp-f1', 2), runq.set_limit('kind', 'lp-f1a', 10),
       runq.set_limit('kind', 'lp-f1b', 1) \gset f1_
SELECT pg_temp.run('lp-f1', 2485, 'lp-f1a') AS f1_l1 \gset
SELECT pg_temp.run('lp-f1', 2485, 'lp-f1b') AS f1_l2 \gset
SELECT is(pg_temp.claim(ARRAY[2485]), ARRAY[:f1_l1, :f1_l2]::bigint[],
          'lp-f1 runs its two runs, one of each kind');
SELECT pg_temp.run('lp-f1', 2485, 'lp-f1b') AS f1_p1 \gset
SELECT pg_temp.run('lp-f1', 2485, 'lp-f1b') AS f1_p2 \gset
SELECT is(pg_temp.claim(ARRAY[2485]), '{}'::bigint[], 'its two more of lp-f1b wait');
SELECT is(ARRAY(SELECT c.completed FROM runq.complete_many(
                    ARRAY[:f1_l1, :f1_l2]::bigint[],
                    ARRAY[pg_temp.epoch(:f1_l1), pg_temp.epoch(:f1_l2)]) AS c),
          ARRAY[true, true], 'complete_many ends both');
SELECT is(pg_temp.claim(ARRAY[2485]), ARRAY[:f1_p1]::bigint[],
          'then only the oldest of lp-f1b runs: its kind''s limit is 1');
SELECT is((SELECT count(*) FROM runq.runs WHERE kind = 'lp-f1b' AND status = 'running'), 1::bigint,
          'lp-f1b has one run running, not two');
SELECT runq.set_limit('tenant', 'lp-f1', NULL), runq.set_limit('kind', 'lp-f1a', NULL),
       runq.set_limit('kind', 'lp-f1b', NULL) \gset f1_

SELECT * FROM finish();
ROLLBACK;
