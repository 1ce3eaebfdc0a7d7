-- Errors: every row of the contract's error table provoked and
-- checked by SQLSTATE, and a rejected call changes nothing. Worker-function
-- RQ003s are in 13_fencing.sql. Classes 1600..1699.
BEGIN;
SELECT plan(95);

-- Everything runq keeps about a run, events included.
CREATE FUNCTION pg_temp.state(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT row_to_json(r)::text FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e WHERE e.run_id = p_run),
        (SELECT json_agg(k ORDER BY k.seq)::text FROM runq.checkpoints AS k WHERE k.run_id = p_run),
        (SELECT json_agg(i ORDER BY i.seq)::text FROM runq.inputs AS i WHERE i.run_id = p_run),
        (SELECT json_agg(t ORDER BY t.call_id)::text FROM runq.tool_calls AS t WHERE t.run_id = p_run))
$$;
-- How much runq holds in all.
CREATE FUNCTION pg_temp.totals() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' ',
        (SELECT count(*) FROM runq.runs), (SELECT count(*) FROM runq.run_events),
        (SELECT count(*) FROM runq.idempotency_keys), (SELECT count(*) FROM runq.checkpoints),
        (SELECT count(*) FROM runq.inputs), (SELECT count(*) FROM runq.tool_calls))
$$;

-- Fixtures: a keyed queued run in a session, a running run with a finished
-- tool call, and one run in each terminal status.
SELECT run_id AS queued FROM runq.submit(tenant_id => 'err', kind => 'k', payload => '{"a": 1}',
                                         session_id => 'err-s1', priority => 1600,
                                         idempotency_key => 'err-key') \gset
SELECT run_id AS running FROM runq.submit(tenant_id => 'err', kind => 'k', session_id => 'err-s2', priority => 1601) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1601], lease => interval '1 hour')), 1::bigint, 'fixture: running run');
SELECT is(runq.begin_tool(:running, 1, 'done-call', 'search', 'read_only'), true, 'fixture: a tool call');
SELECT is(runq.end_tool(:running, 1, 'done-call', '{"hits": 0}'), true, 'fixture: the call finished');
SELECT run_id AS succeeded FROM runq.submit(tenant_id => 'err', kind => 'k', priority => 1602) \gset
SELECT run_id AS failed FROM runq.submit(tenant_id => 'err', kind => 'k', priority => 1602) \gset
SELECT run_id AS cancelled FROM runq.submit(tenant_id => 'err', kind => 'k', priority => 1603) \gset
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1602], max_runs => 2)), 2, 'fixture: two claimed');
SELECT is(runq.complete(:succeeded, 1) AND runq.fail(:failed, 1, '{"code": "x"}'), true,
          'fixture: one succeeded, one failed');
SELECT is(runq.cancel(:cancelled), 'cancelled', 'fixture: one cancelled');

CREATE TEMP TABLE before ON COMMIT DROP AS
SELECT pg_temp.totals() AS totals, pg_temp.state(:queued) AS queued, pg_temp.state(:running) AS running,
       pg_temp.state(:succeeded) AS succeeded, pg_temp.state(:failed) AS failed,
       pg_temp.state(:cancelled) AS cancelled;

-- ---------------------------------------------------------------------------
-- RQ001 idempotency_conflict, RQ002 session_busy
-- ---------------------------------------------------------------------------
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', payload => '{"a": 2}',
                   session_id => 'err-s1', priority => 1600, idempotency_key => 'err-key')$$,
                 'RQ001', NULL, 'RQ001: same key, different request');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', session_id => 'err-s1', priority => 1600)$$,
                 'RQ002', NULL, 'RQ002: the session has a queued run');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', session_id => 'err-s2', priority => 1600)$$,
                 'RQ002', NULL, 'RQ002: the session has a running run');
SELECT is(pg_temp.totals(), (SELECT totals FROM before), 'RQ001 and RQ002 create nothing');

-- ---------------------------------------------------------------------------
-- RQ003 run_not_found (submitter functions)
-- ---------------------------------------------------------------------------
SELECT throws_ok($$SELECT runq.deliver_input(-1, '{}')$$, 'RQ003', NULL, 'RQ003: deliver_input of an unknown run');
SELECT throws_ok('SELECT runq.cancel(-1)', 'RQ003', NULL, 'RQ003: cancel of an unknown run');
SELECT throws_ok('SELECT * FROM runq.get_run(-1)', 'RQ003', NULL, 'RQ003: get_run of an unknown run');
SELECT throws_ok('SELECT * FROM runq.run_events(-1)', 'RQ003', NULL, 'RQ003: run_events of an unknown run');
SELECT throws_ok('SELECT * FROM runq.tool_calls(-1)', 'RQ003', NULL, 'RQ003: tool_calls of an unknown run');

-- ---------------------------------------------------------------------------
-- RQ004 invalid_run_state
-- ---------------------------------------------------------------------------
SELECT throws_ok(format($$SELECT runq.deliver_input(%s, '{"x": 1}')$$, :queued), 'RQ004', NULL,
                 'RQ004: deliver_input to a queued run');
SELECT throws_ok(format($$SELECT runq.deliver_input(%s, '{"x": 1}')$$, :running), 'RQ004', NULL,
                 'RQ004: deliver_input to a running run');
SELECT throws_ok(format($$SELECT runq.deliver_input(%s, '{"x": 1}')$$, :succeeded), 'RQ004', NULL,
                 'RQ004: deliver_input to a succeeded run');
SELECT throws_ok(format($$SELECT runq.deliver_input(%s, '{"x": 1}')$$, :failed), 'RQ004', NULL,
                 'RQ004: deliver_input to a failed run');
SELECT throws_ok(format($$SELECT runq.deliver_input(%s, '{"x": 1}')$$, :cancelled), 'RQ004', NULL,
                 'RQ004: deliver_input to a cancelled run');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'done-call', 'search', 'read_only')$$, :running),
                 'RQ004', NULL, 'RQ004: begin_tool with a call_id the run already finished');
SELECT throws_ok(format($$SELECT runq.end_tool(%s, 1, 'done-call', '{"again": true}')$$, :running),
                 'RQ004', NULL, 'RQ004: end_tool of a call that is not started');

-- ---------------------------------------------------------------------------
-- 22023 invalid_parameter_value: submit
-- ---------------------------------------------------------------------------
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => NULL, kind => 'k')$$, '22023', NULL,
                 '22023: submit with a NULL tenant_id');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => '', kind => 'k')$$, '22023', NULL,
                 '22023: submit with an empty tenant_id');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => NULL)$$, '22023', NULL,
                 '22023: submit with a NULL kind');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => '')$$, '22023', NULL,
                 '22023: submit with an empty kind');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', payload => NULL)$$, '22023', NULL,
                 '22023: submit with an explicit NULL payload');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', payload => '[1, 2]')$$, '22023', NULL,
                 '22023: submit with an array payload');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', payload => '"text"')$$, '22023', NULL,
                 '22023: submit with a string payload');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', session_id => '')$$, '22023', NULL,
                 '22023: submit with an empty session_id');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', priority => -1)$$, '22023', NULL,
                 '22023: submit with class -1');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', priority => 32768)$$, '22023', NULL,
                 '22023: submit with class 32768');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', priority => NULL)$$, '22023', NULL,
                 '22023: submit with a NULL class');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', idempotency_key => '')$$, '22023', NULL,
                 '22023: submit with an empty idempotency key');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', max_attempts => 0)$$, '22023', NULL,
                 '22023: submit with max_attempts 0');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', max_attempts => -3)$$, '22023', NULL,
                 '22023: submit with negative max_attempts');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', max_attempts => NULL)$$, '22023', NULL,
                 '22023: submit with a NULL max_attempts');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', recovery_policy => 'retry')$$, '22023', NULL,
                 '22023: submit with an unknown recovery policy');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', recovery_policy => NULL)$$, '22023', NULL,
                 '22023: submit with a NULL recovery policy');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', queue_ttl => interval '0')$$, '22023', NULL,
                 '22023: submit with a zero queue_ttl');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', queue_ttl => interval '-1 minute')$$, '22023', NULL,
                 '22023: submit with a negative queue_ttl');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', payload => '[]',
                   idempotency_key => 'err-key-2')$$, '22023', NULL,
                 '22023: a bad keyed submit');
SELECT is(pg_temp.totals(), (SELECT totals FROM before), 'rejected submits create nothing, not even a key');

-- ---------------------------------------------------------------------------
-- 22023: claim
-- ---------------------------------------------------------------------------
SELECT throws_ok('SELECT * FROM runq.claim(NULL)', '22023', NULL, '22023: claim with NULL classes');
SELECT throws_ok($$SELECT * FROM runq.claim('{}')$$, '22023', NULL, '22023: claim with empty classes');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[1600, NULL])', '22023', NULL, '22023: claim with a NULL class');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[-1])', '22023', NULL, '22023: claim with class -1');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[1600, 32768])', '22023', NULL, '22023: claim with class 32768');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[1600], max_runs => 0)', '22023', NULL, '22023: claim with max_runs 0');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[1600], max_runs => -1)', '22023', NULL, '22023: claim with negative max_runs');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[1600], max_runs => NULL)', '22023', NULL, '22023: claim with NULL max_runs');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[1600], lease => interval '0')$$, '22023', NULL,
                 '22023: claim with a zero lease');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[1600], lease => interval '-5 seconds')$$, '22023', NULL,
                 '22023: claim with a negative lease');
SELECT is(pg_temp.state(:queued), (SELECT queued FROM before), 'rejected claims leave the ready run queued and untouched');

-- ---------------------------------------------------------------------------
-- 22023: worker functions, on a live run
-- ---------------------------------------------------------------------------
SELECT throws_ok('SELECT runq.heartbeat(NULL, 1)', '22023', NULL, '22023: heartbeat with a NULL run_id');
SELECT throws_ok(format('SELECT runq.heartbeat(%s, NULL)', :running), '22023', NULL, '22023: heartbeat with a NULL epoch');
SELECT throws_ok(format('SELECT runq.complete(%s, NULL)', :running), '22023', NULL, '22023: complete with a NULL epoch');
SELECT throws_ok(format('SELECT runq.fail(%s, 1, NULL)', :running), '22023', NULL, '22023: fail with a NULL failure');
SELECT throws_ok(format($$SELECT runq.fail(%s, 1, '["x"]')$$, :running), '22023', NULL, '22023: fail with a non-object failure');
SELECT throws_ok(format($$SELECT runq.fail(%s, 1, '{"message": "no code"}')$$, :running), '22023', NULL,
                 '22023: fail with a failure without code');
SELECT throws_ok(format($$SELECT runq.fail(%s, 1, '{"code": 7}')$$, :running), '22023', NULL,
                 '22023: fail with a non-string code');
SELECT throws_ok(format('SELECT runq.ask_user(%s, 1, NULL)', :running), '22023', NULL, '22023: ask_user with a NULL question');
SELECT throws_ok(format('SELECT runq.checkpoint(%s, 1, NULL)', :running), '22023', NULL, '22023: checkpoint with a NULL state');
SELECT throws_ok(format('SELECT runq.begin_turn(%s, NULL)', :running), '22023', NULL, '22023: begin_turn with a NULL epoch');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', 'search', 'maybe')$$, :running), '22023', NULL,
                 '22023: begin_tool with an unknown idempotency class');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', 'search', NULL)$$, :running), '22023', NULL,
                 '22023: begin_tool with a NULL idempotency class');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, NULL, 'search', 'read_only')$$, :running), '22023', NULL,
                 '22023: begin_tool with a NULL call_id');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', NULL, 'read_only')$$, :running), '22023', NULL,
                 '22023: begin_tool with a NULL tool');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', 'search', 'read_only', NULL)$$, :running), '22023', NULL,
                 '22023: begin_tool with an explicit NULL args');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', 'search', 'read_only', '[1]')$$, :running), '22023', NULL,
                 '22023: begin_tool with non-object args');
SELECT throws_ok(format($$SELECT runq.end_tool(%s, 1, 'never-begun', '{}')$$, :running), '22023', NULL,
                 '22023: end_tool for a call_id the run never began');
SELECT throws_ok(format($$SELECT runq.end_tool(%s, 1, 'done-call', NULL)$$, :running), '22023', NULL,
                 '22023: end_tool with a NULL outcome');
SELECT throws_ok('SELECT runq.release(NULL, 1)', '22023', NULL, '22023: release with a NULL run_id');
SELECT throws_ok(format('SELECT runq.release(%s, NULL)', :running), '22023', NULL, '22023: release with a NULL epoch');
SELECT is(pg_temp.state(:running), (SELECT running FROM before), 'rejected worker calls change nothing in the run');
SELECT is(runq.heartbeat(:running, 1), true, 'and the run is still live under its epoch');
SELECT is(runq.complete(:running, 1, NULL), true, 'complete with a NULL result is accepted');

-- ---------------------------------------------------------------------------
-- 22023: submitter functions
-- ---------------------------------------------------------------------------
SELECT run_id AS waiting FROM runq.submit(tenant_id => 'err', kind => 'k', session_id => 'err-s3', priority => 1604) \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1604])), 1::bigint, 'fixture: claim the run that will wait');
SELECT is(runq.ask_user(:waiting, 1, '{"q": "?"}'), true, 'fixture: it waits');
CREATE TEMP TABLE before_waiting ON COMMIT DROP AS SELECT pg_temp.state(:waiting) AS s;
SELECT throws_ok(format('SELECT runq.deliver_input(%s, NULL)', :waiting), '22023', NULL,
                 '22023: deliver_input with a NULL input');
SELECT throws_ok($$SELECT runq.deliver_input(NULL, '{}')$$, '22023', NULL, '22023: deliver_input with a NULL run_id');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'err', kind => 'k', session_id => 'err-s3', payload => NULL)$$,
                 '22023', NULL, '22023: a NULL payload is not delivered as input either');
SELECT throws_ok('SELECT runq.cancel(NULL)', '22023', NULL, '22023: cancel with a NULL run_id');
SELECT throws_ok('SELECT * FROM runq.get_run(NULL)', '22023', NULL, '22023: get_run with a NULL run_id');
SELECT throws_ok('SELECT * FROM runq.run_events(NULL)', '22023', NULL, '22023: run_events with a NULL run_id');
SELECT throws_ok('SELECT * FROM runq.tool_calls(NULL)', '22023', NULL, '22023: tool_calls with a NULL run_id');
SELECT is(pg_temp.state(:waiting), (SELECT s FROM before_waiting), 'rejected calls leave the waiting run as it was');

-- ---------------------------------------------------------------------------
-- 22023: operator functions (sweep's, orphan_report's and purge's are in
-- their own files)
-- ---------------------------------------------------------------------------
SELECT throws_ok('SELECT runq.redrive(NULL)', '22023', NULL, '22023: redrive with a NULL run_id');
SELECT throws_ok('SELECT * FROM runq.dead_letter(0)', '22023', NULL, '22023: dead_letter with max_runs 0');
SELECT throws_ok('SELECT * FROM runq.dead_letter(NULL)', '22023', NULL, '22023: dead_letter with a NULL max_runs');

-- ---------------------------------------------------------------------------
-- Nothing else moved
-- ---------------------------------------------------------------------------
SELECT is(pg_temp.state(:queued), (SELECT queued FROM before), 'the queued run is untouched');
SELECT is(pg_temp.state(:succeeded), (SELECT succeeded FROM before), 'the succeeded run is untouched');
SELECT is(pg_temp.state(:failed), (SELECT failed FROM before), 'the failed run is untouched');
SELECT is(pg_temp.state(:cancelled), (SELECT cancelled FROM before), 'the cancelled run is untouched');
SELECT is((SELECT count(*)::int FROM runq.run_events
            WHERE type = 'run.fenced' AND run_id IN (SELECT run_id FROM runq.runs WHERE tenant_id = 'err')), 0,
          'no rejected call was taken for a fenced write');

SELECT * FROM finish();
ROLLBACK;
