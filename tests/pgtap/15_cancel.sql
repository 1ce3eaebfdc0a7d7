-- Cancel: cancelled at once when queued or waiting; a durable flag
-- when running, which the worker's next heartbeat (or checkpoint, begin_turn,
-- begin_tool, ask_user) turns into 'cancelled' with run.cancelled, not
-- run.fenced; complete, fail and end_tool still record what happened;
-- already_terminal otherwise, changing nothing. Classes 1500..1599.
BEGIN;
SELECT plan(61);

CREATE FUNCTION pg_temp.events(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(e.type || '@' || e.epoch, ' ' ORDER BY e.event_id)
      FROM runq.run_events AS e WHERE e.run_id = p_run
$$;
-- Submit and claim a run of its own class: returns the run, claimed under epoch 1.
CREATE FUNCTION pg_temp.running(p_class int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
BEGIN
    SELECT s.run_id INTO v_run FROM runq.submit(tenant_id => 'cancel', kind => 'k', priority => p_class) AS s;
    PERFORM FROM runq.claim(ARRAY[p_class], lease => interval '1 hour') AS c WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;

-- ---------------------------------------------------------------------------
-- queued
-- ---------------------------------------------------------------------------
SELECT run_id AS q FROM runq.submit(tenant_id => 'cancel', kind => 'k', session_id => 'c-1', priority => 1500) \gset
SELECT is(runq.cancel(:q, 'user left'), 'cancelled', 'cancel of a queued run returns cancelled');
SELECT results_eq(format('SELECT status, finished_at IS NOT NULL FROM runq.get_run(%s)', :q),
                  $$VALUES ('cancelled'::text, true)$$, 'the queued run is cancelled and finished');
SELECT is(pg_temp.events(:q), 'run.created@0 run.cancelled@0', 'cancel appends run.cancelled');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1500])), 0, 'a cancelled run is not claimed');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'cancel', kind => 'k', session_id => 'c-1', priority => 1509)),
          'created', 'cancelling frees the session');

-- ---------------------------------------------------------------------------
-- waiting_for_user
-- ---------------------------------------------------------------------------
SELECT run_id AS w FROM runq.submit(tenant_id => 'cancel', kind => 'k', session_id => 'c-2', priority => 1501) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1501])), 1::bigint, 'claim the run that will wait');
SELECT is(runq.ask_user(:w, 1, '{"q": "?"}'), true, 'it waits for the user');
SELECT is(runq.cancel(:w), 'cancelled', 'cancel of a waiting run returns cancelled');
SELECT results_eq(format('SELECT status, finished_at IS NOT NULL FROM runq.get_run(%s)', :w),
                  $$VALUES ('cancelled'::text, true)$$, 'the waiting run is cancelled and finished');
SELECT is(pg_temp.events(:w), 'run.created@0 run.claimed@1 run.waiting_for_user@1 run.cancelled@1',
          'cancel of a waiting run appends run.cancelled with the run''s epoch');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'cancel', kind => 'k', session_id => 'c-2', priority => 1509)),
          'created', 'a cancelled waiting run frees the session: the next submit creates a run');

-- ---------------------------------------------------------------------------
-- running: the flag, then the next heartbeat
-- ---------------------------------------------------------------------------
SELECT run_id AS h FROM runq.submit(tenant_id => 'cancel', kind => 'k', session_id => 'c-3', priority => 1502) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1502], lease => interval '1 hour')), 1::bigint, 'claim the running run');
SELECT is(runq.cancel(:h, 'stop'), 'cancel_requested', 'cancel of a running run returns cancel_requested');
SELECT results_eq(format('SELECT status, cancel_requested, finished_at FROM runq.get_run(%s)', :h),
                  $$VALUES ('running'::text, true, NULL::timestamptz)$$,
                  'the run keeps running with the cancel flag set');
SELECT is(pg_temp.events(:h), 'run.created@0 run.claimed@1 run.cancel_requested@1',
          'cancel of a running run appends run.cancel_requested');
SELECT is(runq.cancel(:h), 'cancel_requested', 'cancelling again returns cancel_requested again');
SELECT is((SELECT status FROM runq.get_run(:h)), 'running', 'and the run is still running');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'cancel', kind => 'k', session_id => 'c-3', priority => 1509)$$,
                 'RQ002', NULL, 'a cancel-requested run still holds its session');

SELECT is(runq.heartbeat(:h, 1), false, 'the next heartbeat returns false');
SELECT results_eq(format('SELECT status, finished_at IS NOT NULL FROM runq.get_run(%s)', :h),
                  $$VALUES ('cancelled'::text, true)$$, 'and the run is cancelled in that same statement');
SELECT is(pg_temp.events(:h), 'run.created@0 run.claimed@1 run.cancel_requested@1 run.cancelled@1',
          'the heartbeat appends run.cancelled with the epoch, not run.fenced');
SELECT is(runq.cancel(:h), 'already_terminal', 'cancelling the cancelled run returns already_terminal');
SELECT is(pg_temp.events(:h), 'run.created@0 run.claimed@1 run.cancel_requested@1 run.cancelled@1',
          'already_terminal appends nothing');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'cancel', kind => 'k', session_id => 'c-3', priority => 1509)),
          'created', 'once cancelled, the session is free');

-- ---------------------------------------------------------------------------
-- running: the other loop writes also end in cancelled, without applying
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(1510) AS c1 \gset
SELECT is(runq.cancel(:c1), 'cancel_requested', 'checkpoint case: cancel requested');
SELECT is(runq.checkpoint(:c1, 1, '{"step": 1}'), false, 'checkpoint of a cancel-requested run returns false');
SELECT is((SELECT status FROM runq.get_run(:c1)), 'cancelled', 'and cancels the run');
SELECT is(pg_temp.events(:c1), 'run.created@0 run.claimed@1 run.cancel_requested@1 run.cancelled@1',
          'with run.cancelled and no run.checkpointed or run.fenced');
SELECT is((SELECT count(*)::int FROM runq.checkpoints WHERE run_id = :c1), 0, 'the checkpoint was not stored');

SELECT pg_temp.running(1511) AS c2 \gset
SELECT is(runq.cancel(:c2), 'cancel_requested', 'begin_turn case: cancel requested');
SELECT is(runq.begin_turn(:c2, 1), false, 'begin_turn of a cancel-requested run returns false');
SELECT is((SELECT status FROM runq.get_run(:c2)), 'cancelled', 'and cancels the run');
SELECT is(pg_temp.events(:c2), 'run.created@0 run.claimed@1 run.cancel_requested@1 run.cancelled@1',
          'with run.cancelled and no run.turn_started or run.fenced');
SELECT is((SELECT turns::int FROM runq.runs WHERE run_id = :c2), 0, 'the turn was not counted');

SELECT pg_temp.running(1512) AS c3 \gset
SELECT is(runq.cancel(:c3), 'cancel_requested', 'begin_tool case: cancel requested');
SELECT is(runq.begin_tool(:c3, 1, 'call-1', 'charge', 'non_idempotent'), false,
          'begin_tool of a cancel-requested run returns false');
SELECT is((SELECT status FROM runq.get_run(:c3)), 'cancelled', 'and cancels the run');
SELECT is(pg_temp.events(:c3), 'run.created@0 run.claimed@1 run.cancel_requested@1 run.cancelled@1',
          'with run.cancelled and no run.tool_started or run.fenced');
SELECT is((SELECT count(*)::int FROM runq.tool_calls(:c3)), 0, 'the tool call was not recorded');

SELECT pg_temp.running(1513) AS c4 \gset
SELECT is(runq.cancel(:c4), 'cancel_requested', 'ask_user case: cancel requested');
SELECT is(runq.ask_user(:c4, 1, '{"q": "?"}'), false, 'ask_user of a cancel-requested run returns false');
SELECT results_eq(format('SELECT status, question FROM runq.get_run(%s)', :c4),
                  $$VALUES ('cancelled'::text, NULL::jsonb)$$, 'and cancels the run without a question');
SELECT is(pg_temp.events(:c4), 'run.created@0 run.claimed@1 run.cancel_requested@1 run.cancelled@1',
          'with run.cancelled and no run.waiting_for_user or run.fenced');

-- ---------------------------------------------------------------------------
-- running: complete, fail and end_tool still record what happened
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(1520) AS d1 \gset
SELECT is(runq.cancel(:d1), 'cancel_requested', 'complete case: cancel requested');
SELECT is(runq.complete(:d1, 1, '{"answer": 1}'), true, 'complete of a cancel-requested run applies');
SELECT results_eq(format('SELECT status, result FROM runq.get_run(%s)', :d1),
                  $$VALUES ('succeeded'::text, '{"answer": 1}'::jsonb)$$, 'the run succeeded with its result');

SELECT pg_temp.running(1521) AS d2 \gset
SELECT is(runq.cancel(:d2), 'cancel_requested', 'fail case: cancel requested');
SELECT is(runq.fail(:d2, 1, '{"code": "crashed"}'), true, 'fail of a cancel-requested run applies');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :d2),
                  $$VALUES ('failed'::text, 'crashed'::text)$$, 'the run failed with its failure');

SELECT pg_temp.running(1522) AS d3 \gset
SELECT is(runq.begin_tool(:d3, 1, 'call-1', 'charge', 'non_idempotent'), true, 'a tool call begins');
SELECT is(runq.cancel(:d3), 'cancel_requested', 'end_tool case: cancel requested');
SELECT is(runq.end_tool(:d3, 1, 'call-1', '{"charged": true}'), true, 'end_tool of a cancel-requested run applies');
SELECT results_eq(format('SELECT status, outcome FROM runq.tool_calls(%s)', :d3),
                  $$VALUES ('finished'::text, '{"charged": true}'::jsonb)$$, 'the tool call is finished');
SELECT results_eq(format('SELECT status, cancel_requested FROM runq.get_run(%s)', :d3),
                  $$VALUES ('running'::text, true)$$, 'the run is still running with the flag');
SELECT is(runq.heartbeat(:d3, 1), false, 'and the next heartbeat cancels it');
SELECT is((SELECT status FROM runq.get_run(:d3)), 'cancelled', 'cancelled');

-- ---------------------------------------------------------------------------
-- terminal: already_terminal, nothing changes
-- ---------------------------------------------------------------------------
SELECT is(runq.cancel(:d1), 'already_terminal', 'cancel of a succeeded run returns already_terminal');
SELECT is(runq.cancel(:d2, 'too late'), 'already_terminal', 'cancel of a failed run returns already_terminal');
SELECT is(runq.cancel(:q), 'already_terminal', 'cancel of a cancelled run returns already_terminal');
SELECT results_eq(
    format($$SELECT status, cancel_requested FROM runq.get_run(%s)
             UNION ALL SELECT status, cancel_requested FROM runq.get_run(%s)$$, :d1, :d2),
    $$VALUES ('succeeded'::text, true), ('failed', true)$$,
    'terminal runs keep their status');
SELECT is(pg_temp.events(:d1), 'run.created@0 run.claimed@1 run.cancel_requested@1 run.succeeded@1',
          'already_terminal appends no event');

SELECT * FROM finish();
ROLLBACK;
