-- The run lifecycle through the API: submit -> claim -> heartbeat ->
-- checkpoint -> begin_turn -> begin_tool/end_tool -> complete, with statuses
-- and events in order; the fail and ask_user/deliver_input paths; what a claim
-- hands back. Runs use class 1100 so nothing else in the database competes.
BEGIN;
SELECT plan(68);

-- ---------------------------------------------------------------------------
-- submit
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE sub1 ON COMMIT DROP AS
SELECT * FROM runq.submit(tenant_id => 'life', kind => 'chat.turn', payload => '{"q": "hi"}',
                          session_id => 'life-s1', priority => 1100);
SELECT run_id AS r1 FROM sub1 \gset

SELECT is((SELECT outcome FROM sub1), 'created', 'submit to an idle session creates a run');
SELECT results_eq(
    format($$SELECT run_id, tenant_id, session_id, kind, status, priority, attempts, max_attempts,
                    lease_epoch, cancel_requested, result, failure, question, finished_at
               FROM runq.get_run(%s)$$, :r1),
    format($$VALUES (%s::bigint, 'life'::text, 'life-s1'::text, 'chat.turn'::text, 'queued'::text,
                     1100, 0, 3, 0::bigint, false, NULL::jsonb, NULL::jsonb, NULL::jsonb,
                     NULL::timestamptz)$$, :r1),
    'a new run is queued with epoch 0, no attempts and the default max_attempts 3');
SELECT results_eq(format('SELECT type, epoch FROM runq.run_events(%s)', :r1),
                  $$VALUES ('run.created'::text, 0::bigint)$$,
                  'submit appends run.created with epoch 0');

-- ---------------------------------------------------------------------------
-- claim
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE claim1 ON COMMIT DROP AS
SELECT * FROM runq.claim(ARRAY[1100], worker_id => 'w-life');

SELECT is((SELECT count(*)::int FROM claim1), 1, 'claim returns the queued run');
SELECT results_eq(
    $$SELECT run_id, epoch, tenant_id, session_id, kind, priority, payload, attempt, checkpoint,
             inputs, resumed FROM claim1$$,
    format($$VALUES (%s::bigint, 1::bigint, 'life'::text, 'life-s1'::text, 'chat.turn'::text, 1100,
                     '{"q": "hi"}'::jsonb, 1, NULL::jsonb, '[]'::jsonb, false)$$, :r1),
    'the first claim: epoch 1, attempt 1, the payload, no checkpoint, inputs [], not resumed');
SELECT ok((SELECT c.lease_expires_at > clock_timestamp()
                  AND c.lease_expires_at <= clock_timestamp() + s.lease
             FROM claim1 AS c, runq.settings AS s),
          'without a lease argument the lease is the settings'' default, from now');
SELECT results_eq(format('SELECT status, attempts, lease_epoch FROM runq.get_run(%s)', :r1),
                  $$VALUES ('running'::text, 1, 1::bigint)$$,
                  'the claimed run is running, attempts 1, epoch 1');
SELECT is((SELECT lease_owner FROM runq.runs WHERE run_id = :r1), 'w-life',
          'the claim records the worker as lease owner');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1100])), 0,
          'a running run is not claimed again');

-- ---------------------------------------------------------------------------
-- heartbeat
-- ---------------------------------------------------------------------------
SELECT lease_expires_at AS lease1 FROM runq.runs WHERE run_id = :r1 \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(runq.heartbeat(:r1, 1), true, 'heartbeat under the live epoch returns true');
SELECT ok((SELECT lease_expires_at > :'lease1'::timestamptz FROM runq.runs WHERE run_id = :r1),
          'heartbeat extends the lease');
SELECT is((SELECT count(*)::int FROM runq.run_events(:r1)), 2, 'heartbeats append no event');
SELECT is((SELECT status FROM runq.get_run(:r1)), 'running', 'the run is still running');

-- ---------------------------------------------------------------------------
-- checkpoint, turns, tools
-- ---------------------------------------------------------------------------
SELECT is(runq.checkpoint(:r1, 1, '{"step": 1}'), true, 'checkpoint returns true');
SELECT is(runq.begin_turn(:r1, 1), true, 'begin_turn returns true');
SELECT is(runq.begin_turn(:r1, 1), true, 'a second begin_turn returns true');
SELECT is((SELECT turns::int FROM runq.runs WHERE run_id = :r1), 2, 'begin_turn counts the run''s turns');

SELECT is(runq.begin_tool(:r1, 1, 'call-1', 'search', 'read_only', '{"q": "x"}'), true,
          'begin_tool returns true');
SELECT results_eq(
    format('SELECT call_id, tool, idempotency, status, epoch, args, outcome, finished_at FROM runq.tool_calls(%s)', :r1),
    $$VALUES ('call-1'::text, 'search'::text, 'read_only'::text, 'started'::text, 1::bigint,
              '{"q": "x"}'::jsonb, NULL::jsonb, NULL::timestamptz)$$,
    'a begun tool call is started under the claiming epoch, with its args');
SELECT is(runq.end_tool(:r1, 1, 'call-1', '{"hits": 3}'), true, 'end_tool returns true');
SELECT results_eq(
    format('SELECT call_id, status, outcome, finished_at IS NOT NULL FROM runq.tool_calls(%s)', :r1),
    $$VALUES ('call-1'::text, 'finished'::text, '{"hits": 3}'::jsonb, true)$$,
    'an ended tool call is finished with its outcome');
SELECT is(runq.begin_tool(:r1, 1, 'call-2', 'send_mail', 'non_idempotent'), true,
          'begin_tool without args returns true');
SELECT is((SELECT args FROM runq.tool_calls(:r1) WHERE call_id = 'call-2'), '{}'::jsonb,
          'args default to {}');
SELECT is(runq.end_tool(:r1, 1, 'call-2', '{"sent": true}'), true, 'end_tool of the second call');
SELECT is((SELECT array_agg(call_id ORDER BY started_at, call_id) FROM runq.tool_calls(:r1)),
          ARRAY['call-1', 'call-2'], 'tool_calls lists every call of the run');

-- ---------------------------------------------------------------------------
-- complete
-- ---------------------------------------------------------------------------
SELECT is(runq.complete(:r1, 1, '{"answer": 42}'), true, 'complete returns true');
SELECT results_eq(
    format($$SELECT status, result, failure, question, attempts, lease_epoch, finished_at IS NOT NULL,
                    finished_at >= created_at
               FROM runq.get_run(%s)$$, :r1),
    $$VALUES ('succeeded'::text, '{"answer": 42}'::jsonb, NULL::jsonb, NULL::jsonb, 1, 1::bigint, true, true)$$,
    'the completed run succeeded with its result and a finish time');
SELECT results_eq(
    format('SELECT type, epoch FROM runq.run_events(%s)', :r1),
    $$VALUES ('run.created'::text, 0::bigint), ('run.claimed', 1), ('run.checkpointed', 1),
             ('run.turn_started', 1), ('run.turn_started', 1),
             ('run.tool_started', 1), ('run.tool_finished', 1),
             ('run.tool_started', 1), ('run.tool_finished', 1),
             ('run.succeeded', 1)$$,
    'every transition appended its event, in order, with its epoch');
SELECT ok((SELECT bool_and(e.event_id > e.prev_id AND e.created_at >= e.prev_at)
             FROM (SELECT event_id, created_at,
                          lag(event_id) OVER () AS prev_id, lag(created_at) OVER () AS prev_at
                     FROM runq.run_events(:r1)) AS e
            WHERE e.prev_id IS NOT NULL),
          'run_events returns events in order of event_id and time');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1100])), 0,
          'claim returns zero rows when nothing is ready');

-- A session whose run finished takes a new run.
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'life', kind => 'chat.turn', session_id => 'life-s1',
                                           priority => 1101)),
          'created', 'a session whose run succeeded accepts a new run');

-- complete without a result.
SELECT run_id AS r4 FROM runq.submit(tenant_id => 'life', kind => 'k', session_id => 'life-s4', priority => 1100) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1100])), 1::bigint, 'claim of the run to complete without result');
SELECT is(runq.complete(:r4, 1), true, 'complete without a result returns true');
SELECT results_eq(format('SELECT status, result FROM runq.get_run(%s)', :r4),
                  $$VALUES ('succeeded'::text, NULL::jsonb)$$,
                  'a run completed without result succeeded with a NULL result');

-- ---------------------------------------------------------------------------
-- fail: the dead letter, at once and for good
-- ---------------------------------------------------------------------------
SELECT run_id AS r2 FROM runq.submit(tenant_id => 'life', kind => 'k', session_id => 'life-s2', priority => 1100) \gset
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1100])), :r2::bigint, 'claim of the run to fail');
SELECT is(runq.fail(:r2, 1, '{"code": "tool_error"}'), true, 'fail returns true');
SELECT results_eq(format('SELECT status, finished_at IS NOT NULL, result FROM runq.get_run(%s)', :r2),
                  $$VALUES ('failed'::text, true, NULL::jsonb)$$,
                  'the failed run is failed and finished');
SELECT results_eq(
    format($$SELECT failure ->> 'code', failure ->> 'message', (failure ->> 'attempt')::int,
                    (failure ->> 'epoch')::bigint, (failure ->> 'at') IS NOT NULL
               FROM runq.get_run(%s)$$, :r2),
    $$VALUES ('tool_error'::text, 'tool_error'::text, 1, 1::bigint, true)$$,
    'failure keeps the code, gets the code as message, and the attempt, epoch and time');
SELECT results_eq(format('SELECT type, epoch FROM runq.run_events(%s)', :r2),
                  $$VALUES ('run.created'::text, 0::bigint), ('run.claimed', 1), ('run.failed', 1)$$,
                  'fail appends run.failed');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1100])), 0,
          'a failed run is never retried by the queue');

SELECT run_id AS r5 FROM runq.submit(tenant_id => 'life', kind => 'k', priority => 1100) \gset
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1100])), :r5::bigint, 'claim of a sessionless run');
SELECT is(runq.fail(:r5, 1, '{"code": "bad_input", "message": "no such file", "path": "/x"}'), true,
          'fail with a message returns true');
SELECT results_eq(
    format($$SELECT failure ->> 'code', failure ->> 'message', failure ->> 'path' FROM runq.get_run(%s)$$, :r5),
    $$VALUES ('bad_input'::text, 'no such file'::text, '/x'::text)$$,
    'a failure keeps its own message and extra fields');

-- ---------------------------------------------------------------------------
-- ask_user and input delivery; what a resumed claim hands back
-- ---------------------------------------------------------------------------
SELECT run_id AS r3 FROM runq.submit(tenant_id => 'life', kind => 'k', session_id => 'life-s3', priority => 1100) \gset
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1100], lease => interval '1 hour')), :r3::bigint,
          'claim of the run that will ask');
SELECT clock_timestamp() AS t3 \gset
SELECT is(runq.heartbeat(:r3, 1), true, 'heartbeat of the run with a 1 hour lease');
SELECT ok((SELECT lease_expires_at >= :'t3'::timestamptz + interval '1 hour'
                  AND lease_expires_at <= clock_timestamp() + interval '1 hour'
             FROM runq.runs WHERE run_id = :r3),
          'a heartbeat extends the lease by the claim''s lease length, from now');
SELECT is(runq.checkpoint(:r3, 1, '{"step": "A"}'), true, 'checkpoint A');
SELECT is(runq.ask_user(:r3, 1, '{"text": "which one?"}'), true, 'ask_user returns true');
SELECT results_eq(format('SELECT status, question, finished_at FROM runq.get_run(%s)', :r3),
                  $$VALUES ('waiting_for_user'::text, '{"text": "which one?"}'::jsonb, NULL::timestamptz)$$,
                  'the run waits for the user with its question');
SELECT is((SELECT lease_expires_at FROM runq.runs WHERE run_id = :r3), NULL::timestamptz,
          'asking the user ends the lease');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1100])), 0, 'a waiting run is not claimed');

SELECT is(runq.deliver_input(:r3, '{"answer": "B"}'), true, 'deliver_input returns true');
SELECT results_eq(format('SELECT status, question, attempts FROM runq.get_run(%s)', :r3),
                  $$VALUES ('queued'::text, NULL::jsonb, 0)$$,
                  'input delivery requeues the run, clears the question and resets attempts');

CREATE TEMP TABLE claim3 ON COMMIT DROP AS SELECT * FROM runq.claim(ARRAY[1100]);
SELECT results_eq($$SELECT run_id, epoch, attempt, resumed, checkpoint, inputs FROM claim3$$,
                  format($$VALUES (%s::bigint, 2::bigint, 1, true, '{"step": "A"}'::jsonb,
                                   '[{"answer": "B"}]'::jsonb)$$, :r3),
                  'the next claim resumes from the checkpoint with the input delivered after it');

-- A newer checkpoint hides older inputs; inputs after it accumulate in order.
SELECT is(runq.checkpoint(:r3, 2, '{"step": "C"}'), true, 'checkpoint C');
SELECT is(runq.ask_user(:r3, 2, '{"text": "and now?"}'), true, 'ask again');
SELECT is(runq.deliver_input(:r3, '{"answer": "D"}'), true, 'deliver D');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1100])), 3::bigint, 'claim under epoch 3');
SELECT is(runq.ask_user(:r3, 3, '{"text": "and then?"}'), true, 'ask a third time, no checkpoint');
SELECT is(runq.deliver_input(:r3, '{"answer": "E"}'), true, 'deliver E');
CREATE TEMP TABLE claim4 ON COMMIT DROP AS SELECT * FROM runq.claim(ARRAY[1100]);
SELECT results_eq($$SELECT epoch, attempt, resumed, checkpoint, inputs FROM claim4$$,
                  $$VALUES (4::bigint, 1, true, '{"step": "C"}'::jsonb,
                            '[{"answer": "D"}, {"answer": "E"}]'::jsonb)$$,
                  'a claim returns the newest checkpoint and every input delivered after it, in order');
SELECT is(runq.complete(:r3, 4), true, 'the resumed run completes');
SELECT results_eq(
    format('SELECT type, epoch FROM runq.run_events(%s)', :r3),
    $$VALUES ('run.created'::text, 0::bigint), ('run.claimed', 1), ('run.checkpointed', 1),
             ('run.waiting_for_user', 1), ('run.input_delivered', 1), ('run.claimed', 2),
             ('run.checkpointed', 2), ('run.waiting_for_user', 2), ('run.input_delivered', 2),
             ('run.claimed', 3), ('run.waiting_for_user', 3), ('run.input_delivered', 3),
             ('run.claimed', 4), ('run.succeeded', 4)$$,
    'the asking run''s events, in order, each with the epoch of its moment');

-- The default lease is the settings' current value.
UPDATE runq.settings SET lease = interval '10 minutes';
SELECT run_id AS r7 FROM runq.submit(tenant_id => 'life', kind => 'k', priority => 1102) \gset
SELECT clock_timestamp() AS t7 \gset
SELECT ok((SELECT lease_expires_at >= :'t7'::timestamptz + interval '10 minutes'
                  AND lease_expires_at <= clock_timestamp() + interval '10 minutes'
             FROM runq.claim(ARRAY[1102])),
          'a claim without lease takes the lease a DBA set in runq.settings');

-- ---------------------------------------------------------------------------
-- submit stores every option
-- ---------------------------------------------------------------------------
SELECT run_id AS r6 FROM runq.submit(tenant_id => 'life', kind => 'batch', payload => '{"n": 1}',
                                     priority => 20, principal_id => 'alice',
                                     scheduled_for => now() + interval '1 hour', max_attempts => 5,
                                     recovery_policy => 'zero_work', queue_ttl => interval '2 hours') \gset
SELECT results_eq(
    format('SELECT session_id, priority, max_attempts, scheduled_for FROM runq.get_run(%s)', :r6),
    $$VALUES (NULL::text, 20, 5, now() + interval '1 hour')$$,
    'get_run shows the submitted class, max_attempts and schedule');
SELECT results_eq(
    format('SELECT principal_id, recovery_policy::text, queue_ttl::interval, payload::jsonb FROM runq.runs WHERE run_id = %s', :r6),
    $$VALUES ('alice'::text, 'zero_work'::text, interval '2 hours', '{"n": 1}'::jsonb)$$,
    'submit stores principal, recovery policy, queue TTL and payload');
SELECT results_eq(
    format($$SELECT payload::jsonb, recovery_policy::text, queue_ttl::interval, max_attempts::int FROM runq.runs WHERE run_id = %s$$,
           (SELECT run_id FROM runq.submit(tenant_id => 'life', kind => 'bare'))),
    $$VALUES ('{}'::jsonb, 'resume'::text, NULL::interval, 3)$$,
    'submit defaults: payload {}, policy resume, no queue TTL, max_attempts 3');
SELECT is((SELECT priority FROM runq.get_run((SELECT max(run_id) FROM runq.runs WHERE kind = 'bare'))),
          10, 'submit defaults to class 10 (async)');

SELECT * FROM finish();
ROLLBACK;
