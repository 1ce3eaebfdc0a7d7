-- Idempotency and sessions: submit's routing in its four steps.
-- Same key and request -> the same run, outcome duplicate, nothing changed;
-- same key, other request -> RQ001 and nothing created; keys scoped by tenant
-- and principal. A busy session -> RQ002 naming its run; a waiting session ->
-- input_delivered; NULL sessions never conflict. Classes 1400..1499.
BEGIN;
SELECT plan(51);

CREATE FUNCTION pg_temp.runs_of(p_tenant text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM runq.runs AS r WHERE r.tenant_id = p_tenant
$$;
-- The DETAIL of the error a statement raises.
CREATE FUNCTION pg_temp.error_detail(p_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_detail text;
BEGIN
    EXECUTE p_sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
    RETURN v_detail;
END
$$;

-- ---------------------------------------------------------------------------
-- Idempotency keys
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE k1 ON COMMIT DROP AS
SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                          session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1');
SELECT run_id AS r1 FROM k1 \gset
SELECT is((SELECT outcome FROM k1), 'created', 'the first submit with a key creates a run');

SELECT results_eq(
    $$SELECT run_id, outcome FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                                             session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1')$$,
    format($$VALUES (%s::bigint, 'duplicate'::text)$$, :r1),
    'the same key and request return the original run as duplicate (not RQ002 for its busy session)');
SELECT results_eq(
    $$SELECT run_id, outcome FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"b": [1, 2], "a": 1}',
                                             session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1',
                                             scheduled_for => NULL, max_attempts => 3, recovery_policy => 'resume',
                                             queue_ttl => NULL)$$,
    format($$VALUES (%s::bigint, 'duplicate'::text)$$, :r1),
    'the same request with reordered payload keys and spelled-out defaults is a duplicate');
SELECT is(pg_temp.runs_of('idem'), 1, 'duplicates create no run');
SELECT results_eq(format('SELECT type FROM runq.run_events(%s)', :r1),
                  $$VALUES ('run.created'::text)$$, 'duplicates append no event');

SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 2, "b": [1, 2]}',
                   session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1')$$,
                 'RQ001', NULL, 'the key with another payload raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'other', payload => '{"a": 1, "b": [1, 2]}',
                   session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1')$$,
                 'RQ001', NULL, 'the key with another kind raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                   session_id => 'idem-s9', priority => 1400, idempotency_key => 'key-1')$$,
                 'RQ001', NULL, 'the key with another session raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                   priority => 1400, idempotency_key => 'key-1')$$,
                 'RQ001', NULL, 'the key without the session raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                   session_id => 'idem-s1', priority => 1401, idempotency_key => 'key-1')$$,
                 'RQ001', NULL, 'the key with another class raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                   session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1',
                   scheduled_for => now() + interval '1 hour')$$,
                 'RQ001', NULL, 'the key with another schedule raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                   session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1', max_attempts => 4)$$,
                 'RQ001', NULL, 'the key with another max_attempts raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                   session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1', recovery_policy => 'fail')$$,
                 'RQ001', NULL, 'the key with another recovery policy raises RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                   session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1', queue_ttl => interval '1 hour')$$,
                 'RQ001', NULL, 'the key with another queue TTL raises RQ001');
SELECT is(pg_temp.runs_of('idem'), 1, 'conflicting requests create no run');
SELECT results_eq(
    $$SELECT run_id, principal_id FROM runq.idempotency_keys WHERE tenant_id = 'idem' AND idempotency_key = 'key-1'$$,
    format($$VALUES (%s::bigint, NULL::text)$$, :r1),
    'the key still names the original run, once');

-- Keys are scoped by tenant and principal.
CREATE TEMP TABLE k2 ON COMMIT DROP AS
SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                          session_id => 'idem-s2', priority => 1400, idempotency_key => 'key-1',
                          principal_id => 'alice');
SELECT run_id AS r2 FROM k2 \gset
SELECT is((SELECT outcome FROM k2), 'created', 'the same key for another principal creates a run');
SELECT results_eq(
    $$SELECT run_id, outcome FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                                             session_id => 'idem-s2', priority => 1400, idempotency_key => 'key-1',
                                             principal_id => 'alice')$$,
    format($$VALUES (%s::bigint, 'duplicate'::text)$$, :r2),
    'that principal''s retry is a duplicate of its own run');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"other": true}',
                   session_id => 'idem-s2', priority => 1400, idempotency_key => 'key-1', principal_id => 'alice')$$,
                 'RQ001', NULL, 'and its key is checked against its own request');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'idem-other', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                                           session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1')),
          'created', 'the same key in another tenant creates a run');
SELECT is(pg_temp.runs_of('idem'), 2, 'tenant idem holds two runs');

-- A duplicate returns the original run whatever became of it.
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1400])), :r1::bigint, 'claim the keyed run');
SELECT is(runq.complete(:r1, 1, '{"ok": 1}'), true, 'complete it');
SELECT results_eq(
    $$SELECT run_id, outcome FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"a": 1, "b": [1, 2]}',
                                             session_id => 'idem-s1', priority => 1400, idempotency_key => 'key-1')$$,
    format($$VALUES (%s::bigint, 'duplicate'::text)$$, :r1),
    'a retry after the run finished is still a duplicate');
SELECT results_eq(format('SELECT status, result FROM runq.get_run(%s)', :r1),
                  $$VALUES ('succeeded'::text, '{"ok": 1}'::jsonb)$$, 'and leaves the finished run as it was');
SELECT is(pg_temp.runs_of('idem'), 2, 'and creates no run in the now idle session');

-- The key comes before input delivery: a retry to a waiting session delivers nothing.
SELECT run_id AS r3 FROM runq.submit(tenant_id => 'idem', kind => 'k', session_id => 'idem-s3',
                                     priority => 1401, idempotency_key => 'key-3') \gset
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1401])), :r3::bigint, 'claim the keyed run of idem-s3');
SELECT is(runq.ask_user(:r3, 1, '{"q": "?"}'), true, 'it asks the user');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'idem', kind => 'k', session_id => 'idem-s3',
                                           priority => 1401, idempotency_key => 'key-3')),
          'duplicate', 'a keyed retry to the waiting session is a duplicate');
SELECT is((SELECT status FROM runq.get_run(:r3)), 'waiting_for_user', 'and the run still waits');
SELECT results_eq(
    $$SELECT run_id, outcome FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"answer": 1}',
                                             session_id => 'idem-s3', priority => 1401, idempotency_key => 'key-4')$$,
    format($$VALUES (%s::bigint, 'input_delivered'::text)$$, :r3),
    'a new key to the waiting session delivers the input');
SELECT results_eq(
    $$SELECT run_id, outcome FROM runq.submit(tenant_id => 'idem', kind => 'k', payload => '{"answer": 1}',
                                             session_id => 'idem-s3', priority => 1401, idempotency_key => 'key-4')$$,
    format($$VALUES (%s::bigint, 'duplicate'::text)$$, :r3),
    'its retry is a duplicate naming the run the input went to, and delivers nothing again');
SELECT is((SELECT count(*)::int FROM runq.inputs WHERE run_id = :r3), 1, 'the input was delivered once');

-- ---------------------------------------------------------------------------
-- Sessions
-- ---------------------------------------------------------------------------
SELECT run_id AS s FROM runq.submit(tenant_id => 'sess', kind => 'chat.turn', session_id => 'sess-1', priority => 1410) \gset
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'sess', kind => 'chat.turn', session_id => 'sess-1', priority => 1410)$$,
                 'RQ002', NULL, 'a submit to a session with a queued run raises RQ002');
SELECT ok(pg_temp.error_detail($$SELECT * FROM runq.submit(tenant_id => 'sess', kind => 'chat.turn', session_id => 'sess-1', priority => 1410)$$)
              ~ ('\m' || :s || '\M'),
          'the RQ002 DETAIL names the active run');
SELECT is(pg_temp.runs_of('sess'), 1, 'RQ002 creates no run');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[1410])), 1::bigint, 'the session''s run is claimed');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'sess', kind => 'chat.turn', session_id => 'sess-1', priority => 1410)$$,
                 'RQ002', NULL, 'a submit to a session with a running run raises RQ002');
SELECT ok(pg_temp.error_detail($$SELECT * FROM runq.submit(tenant_id => 'sess', kind => 'x', session_id => 'sess-1')$$)
              ~ ('\m' || :s || '\M'),
          'the RQ002 DETAIL names the running run');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'sess-other', kind => 'chat.turn', session_id => 'sess-1', priority => 1410)),
          'created', 'the same session id in another tenant is another session');
SELECT is((SELECT count(*)::int FROM runq.submit(tenant_id => 'sess', kind => 'maint', priority => 1411) AS a
                                    CROSS JOIN runq.submit(tenant_id => 'sess', kind => 'maint', priority => 1411) AS b
                   WHERE a.outcome = 'created' AND b.outcome = 'created' AND a.run_id <> b.run_id),
          1, 'two runs without a session in one tenant are both created');
SELECT is(pg_temp.runs_of('sess'), 3, 'NULL sessions never conflict');

-- A waiting session takes the payload as input.
SELECT is(runq.ask_user(:s, 1, '{"q": "which?"}'), true, 'the running run asks the user');
SELECT results_eq(
    $$SELECT run_id, outcome FROM runq.submit(tenant_id => 'sess', kind => 'chat.turn', payload => '{"answer": "yes"}',
                                             session_id => 'sess-1', priority => 1410)$$,
    format($$VALUES (%s::bigint, 'input_delivered'::text)$$, :s),
    'a submit to a waiting session delivers its payload to the waiting run');
SELECT results_eq(format('SELECT status, attempts, question FROM runq.get_run(%s)', :s),
                  $$VALUES ('queued'::text, 0, NULL::jsonb)$$,
                  'the run is queued again with its attempts reset');
SELECT is(pg_temp.runs_of('sess'), 3, 'input delivery creates no run');
SELECT is((SELECT type FROM runq.run_events(:s) ORDER BY event_id DESC LIMIT 1), 'run.input_delivered',
          'input delivery appends run.input_delivered');
CREATE TEMP TABLE resumed ON COMMIT DROP AS SELECT * FROM runq.claim(ARRAY[1410]);
SELECT results_eq($$SELECT run_id, epoch, attempt, resumed, inputs FROM resumed$$,
                  format($$VALUES (%s::bigint, 2::bigint, 1, true, '[{"answer": "yes"}]'::jsonb)$$, :s),
                  'the next claim returns the input with resumed = true');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'sess', kind => 'chat.turn', session_id => 'sess-1', priority => 1410)$$,
                 'RQ002', NULL, 'the resumed run holds the session again');
SELECT is(runq.complete(:s, 2), true, 'the session''s run completes');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'sess', kind => 'chat.turn', session_id => 'sess-1', priority => 1410)),
          'created', 'the idle session accepts a new run');

SELECT * FROM finish();
ROLLBACK;
