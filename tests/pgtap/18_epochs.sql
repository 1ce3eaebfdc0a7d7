-- The epoch rule (v0.2): a worker call -- heartbeat, complete, fail, release,
-- ask_user, checkpoint, begin_turn, begin_tool, end_tool -- under an epoch
-- the run never had (negative, or above its current lease_epoch) returns
-- false, changes nothing in the run and appends no event at all: not even
-- run.fenced, and never another error (no 23514 from the epoch domain). An
-- epoch the run had and lost, 0 included, is an ordinary stale epoch: false
-- and exactly one run.fenced per run and epoch, however many calls. Checked
-- on a running run, a cancel-requested running run (not cancelled by a
-- forged epoch), a queued run never claimed (lease_epoch 0, so epoch 0 is
-- stale, not above current), a waiting run and a succeeded run; the live
-- epoch still works afterwards. A NULL epoch stays 22023 and an unknown
-- run_id RQ003, whatever the epoch. Classes 1800..1899.
BEGIN;
SELECT plan(326);

-- What runq keeps about a run but its events (pg_temp.answer reports those).
CREATE FUNCTION pg_temp.held(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT row_to_json(r)::text FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT json_agg(k ORDER BY k.seq)::text FROM runq.checkpoints AS k WHERE k.run_id = p_run),
        (SELECT json_agg(i ORDER BY i.seq)::text FROM runq.inputs AS i WHERE i.run_id = p_run),
        (SELECT json_agg(t ORDER BY t.call_id)::text FROM runq.tool_calls AS t WHERE t.run_id = p_run))
$$;
-- The run.fenced epochs of a run, in order.
CREATE FUNCTION pg_temp.fenced(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(e.epoch::text, ',' ORDER BY e.event_id), '')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.fenced'
$$;
-- One call and all it did: its answer ('false', or 'ERROR <SQLSTATE>'), then
-- ' + <type>@<epoch>' for each event appended (to any run), then ' + changed
-- the run' when anything else runq keeps about p_run changed. So a refused
-- call that changes nothing and logs nothing answers exactly 'false'.
CREATE FUNCTION pg_temp.answer(p_call text, p_run bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_held   text := pg_temp.held(p_run);
    v_last   bigint := (SELECT coalesce(max(e.event_id), 0) FROM runq.run_events AS e);
    v_answer text;
BEGIN
    BEGIN
        EXECUTE p_call INTO v_answer;
        v_answer := coalesce(v_answer, 'NULL');
    EXCEPTION WHEN OTHERS THEN
        v_answer := 'ERROR ' || SQLSTATE;
    END;
    RETURN v_answer
        || coalesce((SELECT string_agg(' + ' || e.type || '@' || e.epoch, '' ORDER BY e.event_id)
                       FROM runq.run_events AS e WHERE e.event_id > v_last), '')
        || CASE WHEN pg_temp.held(p_run) IS DISTINCT FROM v_held THEN ' + changed the run' ELSE '' END;
END $$;

-- The worker calls, %1$s the run_id and %2$L the epoch. Each would change the
-- run if its fence let it through: end_tool names the live epoch's started
-- call (or a call never begun: the fence comes before that 22023).
CREATE TEMP TABLE calls (n integer, fn text, call text) ON COMMIT DROP;
INSERT INTO calls VALUES
    (1,  'heartbeat',  'SELECT runq.heartbeat(%1$s, %2$L::bigint)'),
    (2,  'complete',   $$SELECT runq.complete(%1$s, %2$L::bigint, '{"forged": true}')$$),
    (3,  'fail',       $$SELECT runq.fail(%1$s, %2$L::bigint, '{"code": "forged"}')$$),
    (4,  'release',    'SELECT runq.release(%1$s, %2$L::bigint)'),
    (5,  'ask_user',   $$SELECT runq.ask_user(%1$s, %2$L::bigint, '{"q": "forged"}')$$),
    (6,  'checkpoint', $$SELECT runq.checkpoint(%1$s, %2$L::bigint, '{"step": "forged"}')$$),
    (7,  'begin_turn', 'SELECT runq.begin_turn(%1$s, %2$L::bigint)'),
    (8,  'begin_tool', $$SELECT runq.begin_tool(%1$s, %2$L::bigint, 'forged-call', 'charge', 'non_idempotent')$$),
    (9,  'end_tool',   $$SELECT runq.end_tool(%1$s, %2$L::bigint, 'live-call', '{"forged": true}')$$),
    (10, 'end_tool of a call never begun', $$SELECT runq.end_tool(%1$s, %2$L::bigint, 'never-begun', '{}')$$);

-- Every call under every epoch the run never had: the least bigint, -1, its
-- current epoch + 1 and the largest bigint. 40 tests.
CREATE FUNCTION pg_temp.never_had(p_run bigint, p_what text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    v_current bigint := (SELECT r.lease_epoch FROM runq.runs AS r WHERE r.run_id = p_run);
    c record;
    e record;
BEGIN
    FOR c IN SELECT * FROM pg_temp.calls ORDER BY n LOOP
        FOR e IN SELECT * FROM (VALUES (1, (-9223372036854775807 - 1)::bigint, 'the least bigint'),
                                       (2, -1::bigint, 'negative'),
                                       (3, v_current + 1, 'its current epoch + 1'),
                                       (4, 9223372036854775807::bigint, 'the largest bigint'))
                                  AS v (n, epoch, what) ORDER BY v.n LOOP
            RETURN NEXT is(pg_temp.answer(format(c.call, p_run, e.epoch), p_run), 'false',
                           format('%s: %s under epoch %s (%s, never had): false, nothing changed, no event',
                                  p_what, c.fn, e.epoch, e.what));
        END LOOP;
    END LOOP;
END $$;
-- Every call under epoch 0, which every run had: stale, so the first call
-- logs the one run.fenced of epoch 0 and the others nothing. 10 tests.
CREATE FUNCTION pg_temp.epoch_zero(p_run bigint, p_what text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT * FROM pg_temp.calls ORDER BY n LOOP
        RETURN NEXT is(pg_temp.answer(format(c.call, p_run, 0), p_run),
                       CASE WHEN c.n = 1 THEN 'false + run.fenced@0' ELSE 'false' END,
                       format('%s: %s under epoch 0 (stale): false, nothing changed, %s',
                              p_what, c.fn, CASE WHEN c.n = 1 THEN 'one run.fenced for epoch 0'
                                                 ELSE 'no second run.fenced' END));
    END LOOP;
END $$;

-- ---------------------------------------------------------------------------
-- A running run under epoch 2 (epoch 1 lost to a requeue), with a checkpoint
-- and a started tool call
-- ---------------------------------------------------------------------------
SELECT run_id AS r FROM runq.submit(tenant_id => 'epochs', kind => 'k', session_id => 'epochs-r',
                                    priority => 1800) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1800])), 1::bigint, 'running: claimed under epoch 1');
SELECT is(runq.ask_user(:r, 1, '{"q": 1}'), true, 'running: epoch 1 asks the user');
SELECT is(runq.deliver_input(:r, '{"a": 1}'), true, 'running: the input requeues it');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1800])), 2::bigint, 'running: claimed again under epoch 2');
SELECT is(runq.checkpoint(:r, 2, '{"step": 2}'), true, 'running: epoch 2 checkpoints');
SELECT is(runq.begin_tool(:r, 2, 'live-call', 'search', 'read_only'), true, 'running: epoch 2 begins a tool call');

SELECT pg_temp.never_had(:r, 'running');
SELECT pg_temp.epoch_zero(:r, 'running');
SELECT is(pg_temp.fenced(:r), '0', 'running: the only run.fenced is epoch 0''s, after fifty refused calls');
SELECT is((SELECT format('%s/%s/%s/%s', status, lease_epoch, attempts, cancel_requested) FROM runq.get_run(:r)),
          'running/2/1/f', 'running: still running under epoch 2, attempt 1, no cancel flag');

-- A NULL epoch is a bad argument, not a fence.
SELECT is(pg_temp.answer(format(c.call, :r, NULL), :r), 'ERROR 22023',
          format('running: %s with a NULL epoch raises 22023 and changes nothing', c.fn))
  FROM calls AS c ORDER BY c.n;

-- The live epoch is unaffected.
SELECT is(runq.heartbeat(:r, 2), true, 'running: the live epoch''s heartbeat returns true');
SELECT is(runq.end_tool(:r, 2, 'live-call', '{"hits": 2}'), true, 'running: the live epoch ends its tool call');
SELECT is((SELECT string_agg(call_id || ':' || status, ',' ORDER BY call_id) FROM runq.tool_calls(:r)),
          'live-call:finished', 'running: no forged tool call, and the live one finished');

-- Epoch 3 was forged above the current epoch before the run had it: once a
-- claim gives it, it is live; once lost, it is stale and fenced once.
SELECT is(runq.release(:r, 2), true, 'running: epoch 2 releases the run');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1800])), 3::bigint, 'running: claimed under epoch 3');
SELECT is(runq.heartbeat(:r, 3), true, 'running: epoch 3, refused while above the current one, is live now');
SELECT is(runq.ask_user(:r, 3, '{"q": 3}'), true, 'running: epoch 3 asks the user');
SELECT is(runq.deliver_input(:r, '{"a": 3}'), true, 'running: the input requeues it');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1800])), 4::bigint, 'running: claimed under epoch 4');
SELECT is(pg_temp.answer(format('SELECT runq.heartbeat(%s, 3)', :r), :r), 'false + run.fenced@3',
          'running: epoch 3, now stale, is fenced with its one run.fenced');
SELECT is(pg_temp.answer(format('SELECT runq.checkpoint(%s, 3, ''{}'')', :r), :r), 'false',
          'running: and only one');
SELECT is(pg_temp.fenced(:r), '0,3', 'running: run.fenced for epochs 0 and 3, none for a never-had epoch');
SELECT is(runq.complete(:r, 4, '{"ok": true}'), true, 'running: epoch 4 completes the run');

-- ---------------------------------------------------------------------------
-- A running run whose cancel was requested: a never-had epoch does not
-- observe the flag (only the live epoch's calls cancel it)
-- ---------------------------------------------------------------------------
SELECT run_id AS k FROM runq.submit(tenant_id => 'epochs', kind => 'k', priority => 1801) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1801])), 1::bigint, 'cancel-requested: claimed under epoch 1');
SELECT is(runq.cancel(:k, 'stop'), 'cancel_requested', 'cancel-requested: the flag is set');

SELECT pg_temp.never_had(:k, 'cancel-requested');
SELECT pg_temp.epoch_zero(:k, 'cancel-requested');
SELECT is((SELECT format('%s/%s/%s', status, lease_epoch, cancel_requested) FROM runq.get_run(:k)),
          'running/1/t', 'cancel-requested: still running under epoch 1 with its flag');
SELECT is(pg_temp.fenced(:k), '0', 'cancel-requested: the only run.fenced is epoch 0''s');
SELECT is(runq.heartbeat(:k, 1), false, 'cancel-requested: the live epoch''s heartbeat observes the flag');
SELECT is((SELECT status FROM runq.get_run(:k)), 'cancelled', 'cancel-requested: and the run is cancelled');

-- ---------------------------------------------------------------------------
-- A queued run never claimed: lease_epoch 0, so 1 is above it and 0 is stale
-- ---------------------------------------------------------------------------
SELECT run_id AS q FROM runq.submit(tenant_id => 'epochs', kind => 'k', priority => 1802) \gset

SELECT pg_temp.never_had(:q, 'queued');
SELECT pg_temp.epoch_zero(:q, 'queued');
SELECT is((SELECT format('%s/%s/%s', status, lease_epoch, attempts) FROM runq.get_run(:q)),
          'queued/0/0', 'queued: still queued, epoch 0, no attempt');
SELECT is(pg_temp.fenced(:q), '0', 'queued: the only run.fenced is epoch 0''s');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1802])), 1::bigint, 'queued: the first claim gives epoch 1');
SELECT is(runq.heartbeat(:q, 1), true, 'queued: and epoch 1 is live');

-- ---------------------------------------------------------------------------
-- A run waiting for the user, under epoch 1
-- ---------------------------------------------------------------------------
SELECT run_id AS w FROM runq.submit(tenant_id => 'epochs', kind => 'k', session_id => 'epochs-w',
                                    priority => 1803) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1803])), 1::bigint, 'waiting: claimed under epoch 1');
SELECT is(runq.ask_user(:w, 1, '{"q": "which?"}'), true, 'waiting: epoch 1 asks the user');

SELECT pg_temp.never_had(:w, 'waiting');
SELECT pg_temp.epoch_zero(:w, 'waiting');
SELECT is((SELECT format('%s/%s/%s', status, lease_epoch, question) FROM runq.get_run(:w)),
          'waiting_for_user/1/{"q": "which?"}', 'waiting: still waiting with its question, epoch 1');
SELECT is(pg_temp.fenced(:w), '0', 'waiting: the only run.fenced is epoch 0''s');
SELECT is(runq.deliver_input(:w, '{"a": "this"}'), true, 'waiting: the input requeues it');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1803])), 2::bigint, 'waiting: claimed under epoch 2');
SELECT is(runq.checkpoint(:w, 2, '{"step": 1}'), true, 'waiting: and epoch 2 is live');

-- ---------------------------------------------------------------------------
-- A succeeded run, under epoch 1
-- ---------------------------------------------------------------------------
SELECT run_id AS s FROM runq.submit(tenant_id => 'epochs', kind => 'k', priority => 1804) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1804])), 1::bigint, 'succeeded: claimed under epoch 1');
SELECT is(runq.complete(:s, 1, '{"ok": true}'), true, 'succeeded: epoch 1 completes it');

SELECT pg_temp.never_had(:s, 'succeeded');
SELECT pg_temp.epoch_zero(:s, 'succeeded');
SELECT is((SELECT format('%s/%s/%s', status, lease_epoch, result) FROM runq.get_run(:s)),
          'succeeded/1/{"ok": true}', 'succeeded: still succeeded with its result, epoch 1');
SELECT is(pg_temp.fenced(:s), '0', 'succeeded: the only run.fenced is epoch 0''s');

-- ---------------------------------------------------------------------------
-- Only a run that exists can fence: RQ003 under any epoch
-- ---------------------------------------------------------------------------
SELECT is(pg_temp.answer(format(c.call, -1800, e.epoch), -1800), 'ERROR RQ003',
          format('%s of an unknown run under epoch %s raises RQ003 and logs nothing', c.fn, e.epoch))
  FROM calls AS c, (VALUES (1, -1::bigint), (2, 9223372036854775807)) AS e (n, epoch)
 ORDER BY c.n, e.n;

-- ---------------------------------------------------------------------------
-- A forged epoch that a claim reaches between the fence and _refuse's read:
-- the fence saw an epoch the run never had, so no run.fenced for it, though
-- the run is by then running under it. _refuse is called as the fence would.
-- ---------------------------------------------------------------------------
SELECT run_id AS f FROM runq.submit(tenant_id => 'epochs', kind => 'k', priority => 1805) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1805])), 1::bigint, 'forged: claimed under epoch 1');
SELECT is(runq._refuse(:f, 1, 'heartbeat', true), false,
          'forged: _refuse of the epoch the run now runs under answers false');
SELECT is(pg_temp.fenced(:f), '', 'forged: and logs no run.fenced for that live epoch');
SELECT is(runq.heartbeat(:f, 1), true, 'forged: epoch 1 is live and untouched');

SELECT * FROM finish();
ROLLBACK;
