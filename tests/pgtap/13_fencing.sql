-- Fencing: a stale epoch's heartbeat, complete, fail, ask_user,
-- checkpoint, begin_turn, begin_tool and end_tool each return false, change
-- nothing in the run (row, events, checkpoints, inputs, tool calls), and leave
-- exactly one run.fenced per run and stale epoch, carrying that stale epoch.
-- Only status and epoch fence: an expired, unswept lease still works.
-- An unknown run_id raises RQ003 in every worker function. Class 1300.
BEGIN;
SELECT plan(65);

-- Everything runq keeps about a run except its run.fenced events.
CREATE FUNCTION pg_temp.state(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT row_to_json(r)::text FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e
          WHERE e.run_id = p_run AND e.type <> 'run.fenced'),
        (SELECT json_agg(k ORDER BY k.seq)::text FROM runq.checkpoints AS k WHERE k.run_id = p_run),
        (SELECT json_agg(i ORDER BY i.seq)::text FROM runq.inputs AS i WHERE i.run_id = p_run),
        (SELECT json_agg(t ORDER BY t.call_id)::text FROM runq.tool_calls AS t WHERE t.run_id = p_run))
$$;
CREATE FUNCTION pg_temp.fenced(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(e.epoch::text, ',' ORDER BY e.event_id), '')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.fenced'
$$;

-- ---------------------------------------------------------------------------
-- A run taken over by epoch 2 while its epoch-1 worker lives on
-- ---------------------------------------------------------------------------
SELECT run_id AS r FROM runq.submit(tenant_id => 'fence', kind => 'k', session_id => 'fence-s1', priority => 1300) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1300])), 1::bigint, 'claimed under epoch 1');
SELECT is(runq.begin_tool(:r, 1, 'old-call', 'search', 'read_only'), true, 'epoch 1 begins a tool call');
SELECT is(runq.ask_user(:r, 1, '{"q": 1}'), true, 'epoch 1 asks the user');
SELECT is(runq.deliver_input(:r, '{"a": 1}'), true, 'the input requeues the run');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1300])), 2::bigint, 'claimed again under epoch 2');
SELECT is(runq.checkpoint(:r, 2, '{"step": 2}'), true, 'epoch 2 checkpoints');
SELECT is(runq.begin_tool(:r, 2, 'live-call', 'search', 'read_only'), true, 'epoch 2 begins a tool call');
SELECT is(pg_temp.fenced(:r), '', 'no run.fenced yet');

CREATE TEMP TABLE before ON COMMIT DROP AS SELECT pg_temp.state(:r) AS s;

SELECT is(runq.heartbeat(:r, 1), false, 'a stale heartbeat returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale heartbeat changes nothing');
SELECT is(pg_temp.fenced(:r), '1', 'a stale heartbeat appends one run.fenced with the stale epoch');

SELECT is(runq.complete(:r, 1, '{"done": true}'), false, 'a stale complete returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale complete changes nothing');

SELECT is(runq.fail(:r, 1, '{"code": "boom"}'), false, 'a stale fail returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale fail changes nothing');

SELECT is(runq.ask_user(:r, 1, '{"q": 2}'), false, 'a stale ask_user returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale ask_user changes nothing');

SELECT is(runq.checkpoint(:r, 1, '{"step": 1}'), false, 'a stale checkpoint returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale checkpoint changes nothing');

SELECT is(runq.begin_turn(:r, 1), false, 'a stale begin_turn returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale begin_turn changes nothing');

SELECT is(runq.begin_tool(:r, 1, 'stale-call', 'charge', 'non_idempotent'), false,
          'a stale begin_tool returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale begin_tool changes nothing');

SELECT is(runq.end_tool(:r, 1, 'old-call', '{"hits": 1}'), false,
          'a stale end_tool of its own call returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale end_tool of its own call changes nothing');
SELECT is(runq.end_tool(:r, 1, 'live-call', '{"hits": 1}'), false,
          'a stale end_tool of the live epoch''s call returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM before), 'a stale end_tool of the live call changes nothing');

SELECT is(runq.heartbeat(:r, 1), false, 'the stale epoch stays fenced');
SELECT is(pg_temp.fenced(:r), '1', 'exactly one run.fenced for the stale epoch after nine fenced calls');

-- The live holder is unaffected.
SELECT is(runq.heartbeat(:r, 2), true, 'the live epoch''s heartbeat still returns true');
SELECT is(runq.end_tool(:r, 2, 'live-call', '{"hits": 2}'), true, 'the live epoch ends its tool call');
SELECT is((SELECT outcome FROM runq.tool_calls(:r) WHERE call_id = 'live-call'), '{"hits": 2}'::jsonb,
          'the live call holds the live outcome');

-- A second stale epoch gets its own single run.fenced.
SELECT is(runq.ask_user(:r, 2, '{"q": 3}'), true, 'epoch 2 asks the user');
SELECT is(runq.deliver_input(:r, '{"a": 2}'), true, 'the input requeues the run again');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1300])), 3::bigint, 'claimed under epoch 3');
SELECT is(runq.begin_turn(:r, 2), false, 'epoch 2 is now stale');
SELECT is(runq.checkpoint(:r, 2, '{}'), false, 'and stays stale');
SELECT is(runq.begin_turn(:r, 1), false, 'epoch 1 is still stale');
SELECT is(pg_temp.fenced(:r), '1,2', 'one run.fenced per stale epoch: epochs 1 and 2');

-- A terminal run fences its last holder.
SELECT is(runq.complete(:r, 3, '{"ok": true}'), true, 'epoch 3 completes the run');
CREATE TEMP TABLE after_complete ON COMMIT DROP AS SELECT pg_temp.state(:r) AS s;
SELECT is(runq.complete(:r, 3, '{"ok": false}'), false, 'a second complete of a finished run returns false');
SELECT is(runq.fail(:r, 3, '{"code": "late"}'), false, 'a fail after complete returns false');
SELECT is(runq.heartbeat(:r, 3), false, 'a heartbeat after complete returns false');
SELECT is(pg_temp.state(:r), (SELECT s FROM after_complete), 'writes after the end change nothing');
SELECT is((SELECT result FROM runq.get_run(:r)), '{"ok": true}'::jsonb, 'the first result stands');
SELECT is(pg_temp.fenced(:r), '1,2,3', 'the finished run''s last epoch is fenced once');
SELECT results_eq(
    format($$SELECT type, epoch FROM runq.run_events(%s) WHERE type IN ('run.fenced', 'run.succeeded')$$, :r),
    $$VALUES ('run.fenced'::text, 1::bigint), ('run.fenced', 2), ('run.succeeded', 3), ('run.fenced', 3)$$,
    'run_events shows each run.fenced with the stale epoch, in order');

-- A queued run never claimed: epoch 0 is not a lease.
SELECT run_id AS q FROM runq.submit(tenant_id => 'fence', kind => 'k', priority => 1301) \gset
SELECT is(runq.heartbeat(:q, 0), false, 'a heartbeat on a queued run returns false');
SELECT is((SELECT status FROM runq.get_run(:q)), 'queued', 'and leaves it queued');

-- ---------------------------------------------------------------------------
-- Only status and epoch fence: an expired lease nobody swept still works
-- ---------------------------------------------------------------------------
SELECT run_id AS x FROM runq.submit(tenant_id => 'fence', kind => 'k', priority => 1302) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1302], lease => interval '1 millisecond')), 1::bigint,
          'claimed with a 1 ms lease');
DO $$ BEGIN PERFORM pg_sleep(0.01); END $$;
SELECT clock_timestamp() AS t0 \gset
SELECT ok((SELECT lease_expires_at < :'t0'::timestamptz FROM runq.runs WHERE run_id = :x), 'the lease has expired');
SELECT is(runq.heartbeat(:x, 1), true, 'the heartbeat of an expired, unswept lease returns true');
SELECT ok((SELECT lease_expires_at >= :'t0'::timestamptz + interval '1 millisecond' FROM runq.runs WHERE run_id = :x),
          'and extends the lease by its length from now');
DO $$ BEGIN PERFORM pg_sleep(0.01); END $$;
SELECT is(runq.checkpoint(:x, 1, '{"late": true}'), true, 'a checkpoint under an expired lease applies');
SELECT is(runq.complete(:x, 1), true, 'a complete under an expired lease applies');
SELECT is(pg_temp.fenced(:x), '', 'nothing was fenced');

-- ---------------------------------------------------------------------------
-- Only a run that exists can fence: RQ003 for an unknown run_id
-- ---------------------------------------------------------------------------
SELECT throws_ok('SELECT runq.heartbeat(-1, 1)', 'RQ003', NULL, 'heartbeat of an unknown run raises RQ003');
SELECT throws_ok('SELECT runq.complete(-1, 1)', 'RQ003', NULL, 'complete of an unknown run raises RQ003');
SELECT throws_ok($$SELECT runq.fail(-1, 1, '{"code": "x"}')$$, 'RQ003', NULL, 'fail of an unknown run raises RQ003');
SELECT throws_ok($$SELECT runq.ask_user(-1, 1, '{}')$$, 'RQ003', NULL, 'ask_user of an unknown run raises RQ003');
SELECT throws_ok($$SELECT runq.checkpoint(-1, 1, '{}')$$, 'RQ003', NULL, 'checkpoint of an unknown run raises RQ003');
SELECT throws_ok('SELECT runq.begin_turn(-1, 1)', 'RQ003', NULL, 'begin_turn of an unknown run raises RQ003');
SELECT throws_ok($$SELECT runq.begin_tool(-1, 1, 'c', 't', 'read_only')$$, 'RQ003', NULL,
                 'begin_tool of an unknown run raises RQ003');
SELECT throws_ok($$SELECT runq.end_tool(-1, 1, 'c', '{}')$$, 'RQ003', NULL, 'end_tool of an unknown run raises RQ003');
SELECT is((SELECT count(*)::int FROM runq.run_events WHERE run_id = -1), 0, 'an unknown run gets no run.fenced');

SELECT * FROM finish();
ROLLBACK;
