-- runq.orphan_report and runq.queue_stats, for operators.
-- orphan_report reads only: running runs grouped by lease owner, by whether
-- the heartbeat is older than stale_after (default: the settings' threshold)
-- and by whether they did work; it transitions nothing, not even a run whose
-- lease has expired. queue_stats counts ready, scheduled, running,
-- waiting_for_user and failed runs per class. Runs use classes 34xx.
BEGIN;
SELECT plan(32);

-- ---------------------------------------------------------------------------
-- orphan_report: fixtures
-- ---------------------------------------------------------------------------
-- w-a: one run without work, one with a turn, one with a tool call.
SELECT run_id AS o_a FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3400) \gset
SELECT epoch AS e_a FROM runq.claim(ARRAY[3400], worker_id => 'w-a') \gset
SELECT run_id AS o_b FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3400) \gset
SELECT epoch AS e_b FROM runq.claim(ARRAY[3400], worker_id => 'w-a') \gset
SELECT run_id AS o_c FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3400) \gset
SELECT epoch AS e_c FROM runq.claim(ARRAY[3400], worker_id => 'w-a') \gset
-- w-b: two runs without work, one with an old heartbeat, one with an expired
-- (unswept) lease.
SELECT run_id AS o_d FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3400) \gset
SELECT epoch AS e_d FROM runq.claim(ARRAY[3400], worker_id => 'w-b') \gset
SELECT run_id AS o_e FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3400) \gset
SELECT epoch AS e_e FROM runq.claim(ARRAY[3400], worker_id => 'w-b', lease => interval '1 millisecond') \gset
-- No worker_id: a run with a turn.
SELECT run_id AS o_f FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3400) \gset
SELECT epoch AS e_f FROM runq.claim(ARRAY[3400]) \gset
SELECT ok(runq.begin_turn(:o_b, :e_b) AND runq.begin_tool(:o_c, :e_c, 'c1', 'lookup', 'read_only')
          AND runq.begin_turn(:o_f, :e_f),
          'orphan_report fixtures: w-a''s second run begins a turn, its third a tool call; the ownerless run a turn');
-- Not running, so not reported: a queued, a waiting and a failed run.
SELECT run_id AS o_w FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3401) \gset
SELECT epoch AS e_w FROM runq.claim(ARRAY[3401], worker_id => 'w-a') \gset
SELECT run_id AS o_x FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3401) \gset
SELECT epoch AS e_x FROM runq.claim(ARRAY[3401], worker_id => 'w-a') \gset
SELECT run_id AS o_q FROM runq.submit(tenant_id => 'orph', kind => 'k', priority => 3401) \gset
SELECT ok(runq.ask_user(:o_w, :e_w, '{"q": "?"}') AND runq.fail(:o_x, :e_x, '{"code": "boom"}'),
          'orphan_report fixtures: a waiting and a failed run of w-a, and a queued run');
-- fixture: w-b's first run last heartbeat 10 minutes ago
UPDATE runq.runs SET heartbeat_at = clock_timestamp() - interval '10 minutes' WHERE run_id = :o_d
RETURNING heartbeat_at AS hb_d \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;

-- ctid too: a run rewritten with the same values is a write all the same.
CREATE TEMP TABLE runs_before AS SELECT ctid::text AS row_version, * FROM runq.runs;
CREATE TEMP TABLE events_before AS SELECT * FROM runq.run_events;
CREATE TEMP TABLE tool_calls_before AS SELECT * FROM runq.tool_calls;

-- ---------------------------------------------------------------------------
-- orphan_report: grouping
-- ---------------------------------------------------------------------------
SELECT results_eq(
    $$SELECT lease_owner, stale, did_work, runs FROM runq.orphan_report(stale_after => interval '1 hour')
       ORDER BY lease_owner NULLS FIRST, stale, did_work$$,
    $$VALUES (NULL::text, false, true, 1::bigint), ('w-a', false, false, 1), ('w-a', false, true, 2),
             ('w-b', false, false, 2)$$,
    'stale_after 1 hour: nothing stale; grouped by owner (NULL too) and by work (a turn or a tool call)');
SELECT results_eq(
    $$SELECT lease_owner, stale, did_work, runs FROM runq.orphan_report(stale_after => interval '1 millisecond')
       ORDER BY lease_owner NULLS FIRST, stale, did_work$$,
    $$VALUES (NULL::text, true, true, 1::bigint), ('w-a', true, false, 1), ('w-a', true, true, 2),
             ('w-b', true, false, 2)$$,
    'stale_after 1 millisecond: every running run is stale');
SELECT results_eq(
    $$SELECT lease_owner, stale, did_work, runs FROM runq.orphan_report(stale_after => interval '5 minutes')
       ORDER BY lease_owner NULLS FIRST, stale, did_work$$,
    $$VALUES (NULL::text, false, true, 1::bigint), ('w-a', false, false, 1), ('w-a', false, true, 2),
             ('w-b', false, false, 1), ('w-b', true, false, 1)$$,
    'stale_after 5 minutes: only the run with the 10-minute-old heartbeat is stale');
SELECT is((SELECT oldest_heartbeat_at FROM runq.orphan_report(stale_after => interval '5 minutes')
            WHERE lease_owner = 'w-b' AND stale),
          :'hb_d'::timestamptz, 'oldest_heartbeat_at is the stale group''s oldest heartbeat');
SELECT is((SELECT oldest_heartbeat_at FROM runq.orphan_report(stale_after => interval '1 hour')
            WHERE lease_owner = 'w-b'),
          :'hb_d'::timestamptz, 'oldest_heartbeat_at is the minimum over the group');
SELECT results_eq(
    $$SELECT lease_owner, stale, did_work, runs FROM runq.orphan_report()
       ORDER BY lease_owner NULLS FIRST, stale, did_work$$,
    $$SELECT lease_owner, stale, did_work, runs FROM runq.orphan_report(stale_after => interval '2 minutes')
       ORDER BY lease_owner NULLS FIRST, stale, did_work$$,
    'the default threshold with the default 30 s lease is 2 minutes (greatest of 2 min and 5 x lease/3)');
SELECT is((SELECT count(*)::int FROM runq.orphan_report() WHERE stale), 1,
          'the default threshold finds the 10-minute-old heartbeat stale');
UPDATE runq.settings SET lease = interval '10 minutes';
SELECT is((SELECT count(*)::int FROM runq.orphan_report() WHERE stale), 0,
          'with a 10-minute default lease the derived threshold is 5 x 10 min / 3: nothing stale');
UPDATE runq.settings SET lease = interval '30 seconds', stale_after = interval '1 millisecond';
SELECT is((SELECT sum(runs)::int FROM runq.orphan_report() WHERE stale), 6,
          'a DBA''s settings.stale_after is the default: at 1 ms all six running runs are stale');
UPDATE runq.settings SET stale_after = NULL;

SELECT throws_ok($$SELECT * FROM runq.orphan_report(stale_after => interval '0 seconds')$$, '22023', NULL,
                 'orphan_report refuses stale_after 0 with 22023');
SELECT throws_ok($$SELECT * FROM runq.orphan_report(stale_after => interval '-1 minute')$$, '22023', NULL,
                 'orphan_report refuses a negative stale_after with 22023');

-- ---------------------------------------------------------------------------
-- orphan_report: roles
-- ---------------------------------------------------------------------------
SET ROLE runq_admin;
SELECT is((SELECT sum(runs)::int FROM runq.orphan_report()), 6, 'runq_admin may read the orphan report');
RESET ROLE;
SET ROLE runq_worker;
SELECT throws_ok('SELECT * FROM runq.orphan_report()', '42501', NULL, 'runq_worker may not (42501)');
RESET ROLE;
SET ROLE runq_client;
SELECT throws_ok('SELECT * FROM runq.orphan_report()', '42501', NULL, 'runq_client may not (42501)');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- orphan_report changed nothing
-- ---------------------------------------------------------------------------
SELECT is_empty($$(SELECT ctid::text, * FROM runq.runs EXCEPT ALL SELECT * FROM runs_before)
                  UNION ALL
                  (SELECT * FROM runs_before EXCEPT ALL SELECT ctid::text, * FROM runq.runs)$$,
                'orphan_report wrote no run');
SELECT is_empty($$(SELECT * FROM runq.run_events EXCEPT ALL SELECT * FROM events_before)
                  UNION ALL
                  (SELECT * FROM events_before EXCEPT ALL SELECT * FROM runq.run_events)$$,
                'orphan_report appended and changed no event');
SELECT is_empty($$(SELECT * FROM runq.tool_calls EXCEPT ALL SELECT * FROM tool_calls_before)
                  UNION ALL
                  (SELECT * FROM tool_calls_before EXCEPT ALL SELECT * FROM runq.tool_calls)$$,
                'orphan_report changed no tool call');
SELECT results_eq(format('SELECT status, lease_epoch FROM runq.get_run(%s)', :o_e),
                  $$VALUES ('running'::text, 1::bigint)$$,
                  'the run with an expired lease is still running: only the sweep decides it');
SELECT results_eq('SELECT run_id, action FROM runq.sweep()', format($$VALUES (%s::bigint, 'requeued'::text)$$, :o_e),
                  '(and the sweep does)');

-- Wrap the report's fixtures up so they do not count below.
SELECT ok(runq.complete(:o_a, :e_a) AND runq.complete(:o_b, :e_b) AND runq.complete(:o_c, :e_c)
          AND runq.complete(:o_d, :e_d) AND runq.complete(:o_f, :e_f),
          '(the running fixtures complete)');

-- ---------------------------------------------------------------------------
-- queue_stats
-- ---------------------------------------------------------------------------
-- Class 3410: 5 failed, 4 waiting, 3 running, one succeeded and one
-- cancelled run, then 2 ready and 1 scheduled: every count differs. Each claim
-- takes the only queued run of the class.
DO $$
DECLARE
    v_id  bigint;
    v_ep  bigint;
BEGIN
    FOR i IN 1..12 LOOP
        SELECT s.run_id INTO v_id FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3410) AS s;
        SELECT c.epoch INTO v_ep FROM runq.claim(ARRAY[3410]) AS c;
        IF i <= 5 THEN
            PERFORM runq.fail(v_id, v_ep, '{"code": "boom"}');
        ELSIF i <= 9 THEN
            PERFORM runq.ask_user(v_id, v_ep, '{"q": "?"}');
        END IF;
    END LOOP;
    SELECT s.run_id INTO v_id FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3410) AS s;
    SELECT c.epoch INTO v_ep FROM runq.claim(ARRAY[3410]) AS c;
    PERFORM runq.complete(v_id, v_ep);
    SELECT s.run_id INTO v_id FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3410) AS s;
    PERFORM runq.cancel(v_id);
END
$$;
SELECT results_eq($$SELECT status::text, count(*)::int FROM runq.runs WHERE priority = 3410 GROUP BY 1 ORDER BY 1$$,
                  $$VALUES ('cancelled'::text, 1), ('failed', 5), ('running', 3), ('succeeded', 1),
                           ('waiting_for_user', 4)$$,
                  'stats fixtures: class 3410 has 5 failed, 4 waiting, 3 running, 1 succeeded, 1 cancelled run');
-- Two ready runs (one scheduled in the past; one queued for a minute) and
-- one scheduled an hour ahead.
SELECT run_id AS s_past FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3410,
                                         scheduled_for => now() - interval '1 minute') \gset
SELECT run_id AS s_old FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3410) \gset
UPDATE runq.runs SET created_at = created_at - interval '1 minute' WHERE run_id = :s_old;  -- fixture
SELECT run_id AS s_later FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3410,
                                          scheduled_for => now() + interval '1 hour') \gset
-- Class 3412: only finished runs. Class 3413: only a dead-lettered run.
SELECT run_id AS s_done FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3412) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3412]) \gset
SELECT is(runq.complete(:s_done, :e), true, 'stats fixtures: class 3412 has only a succeeded run');
SELECT run_id AS s_dl FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3413,
                                       max_attempts => 1) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3413], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT results_eq('SELECT run_id, action FROM runq.sweep()',
                  format($$VALUES (%s::bigint, 'dead_lettered'::text)$$, :s_dl),
                  'stats fixtures: class 3413 has only a dead-lettered run');

SELECT results_eq(
    $$SELECT priority, ready, scheduled, running, waiting_for_user, failed
        FROM runq.queue_stats WHERE priority BETWEEN 3410 AND 3419 ORDER BY priority$$,
    $$VALUES (3410, 2::bigint, 1::bigint, 3::bigint, 4::bigint, 5::bigint),
             (3413, 0, 0, 0, 0, 1)$$,
    'queue_stats: per class ready, scheduled, running, waiting_for_user, failed; no row for a class with only finished runs');
SELECT ok((SELECT oldest_ready_age BETWEEN interval '30 seconds' AND interval '2 minutes'
             FROM runq.queue_stats WHERE priority = 3410),
          'queue_stats: oldest_ready_age is the age of the oldest ready run, from created_at');
SELECT is((SELECT oldest_ready_age FROM runq.queue_stats WHERE priority = 3413), NULL,
          'queue_stats: no ready run, no oldest_ready_age');

-- A queued run with scheduled_for NULL is ready (claimable) even when it was
-- submitted after the reader's transaction began.
SELECT run_id AS s_new FROM runq.submit(tenant_id => 'stats', kind => 'k', priority => 3411) \gset
SELECT results_eq(
    $$SELECT ready, scheduled FROM runq.queue_stats WHERE priority = 3411$$,
    $$VALUES (1::bigint, 0::bigint)$$,
    'queue_stats: a queued run with scheduled_for NULL counts as ready, not scheduled');

SET ROLE runq_admin;
SELECT is((SELECT failed FROM runq.queue_stats WHERE priority = 3413), 1::bigint,
          'runq_admin may read queue_stats');
RESET ROLE;
SET ROLE runq_worker;
SELECT throws_ok('SELECT * FROM runq.queue_stats', '42501', NULL, 'runq_worker may not read queue_stats (42501)');
RESET ROLE;
SET ROLE runq_client;
SELECT throws_ok('SELECT * FROM runq.queue_stats', '42501', NULL, 'runq_client may not read queue_stats (42501)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
