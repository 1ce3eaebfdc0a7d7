-- runq.complete_and_claim: runq.complete then runq.claim in one call and one
-- transaction. The run given succeeds as complete makes it (its result, one
-- run.succeeded), then the claim takes what runq.claim would (order, kinds,
-- max_runs, lease, worker, the resumed run's checkpoint and inputs). One row
-- per claimed run, each with completed; one row with NULLs when nothing is
-- claimed. A fenced completion answers false with exactly one run.fenced per
-- run and epoch, and claims nothing unless claim_if_fenced. A NULL run_id and
-- epoch complete nothing. A slot the completion frees under a limit is there
-- for the claim of the same call. Bad claim arguments raise 22023 and an
-- unknown run RQ003, and nothing changes, not even the completion. Grants
-- are in 17_privileges.sql. Classes 3600..3699; tenants cc-*.
BEGIN;
SELECT plan(41);

-- A queued run of this file; its id.
CREATE FUNCTION pg_temp.run(p_class integer, p_tenant text DEFAULT 'cc-a', p_kind text DEFAULT 'cc-k')
    RETURNS bigint LANGUAGE sql AS $$
    SELECT s.run_id FROM runq.submit(tenant_id => p_tenant, kind => p_kind, priority => p_class) AS s
$$;
-- A run claimed under epoch 1.
CREATE FUNCTION pg_temp.running(p_class integer, p_tenant text DEFAULT 'cc-a') RETURNS bigint
    LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint := pg_temp.run(p_class, p_tenant);
BEGIN
    PERFORM FROM runq.claim(ARRAY[p_class], 'w-cc', interval '1 hour') AS c
     WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;
-- A run's events as type@epoch, in order.
CREATE FUNCTION pg_temp.events(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(e.type || '@' || e.epoch ORDER BY e.event_id) FROM runq.run_events(p_run) AS e
$$;
CREATE FUNCTION pg_temp.status(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT g.status FROM runq.get_run(p_run) AS g
$$;
-- Everything a call could change: the runs of this file and their events.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s %s %s %s', r.run_id, r.status, r.lease_epoch, r.result), ';' ORDER BY r.run_id)
           || ' / ' || (SELECT count(*) FROM runq.run_events AS e
                         WHERE e.run_id IN (SELECT x.run_id FROM runq.runs AS x WHERE x.tenant_id LIKE 'cc-%'))
      FROM runq.runs AS r WHERE r.tenant_id LIKE 'cc-%'
$$;

-- ---------------------------------------------------------------------------
-- Complete and claim
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3600) AS a \gset
SELECT pg_temp.run(3600) AS b1 \gset
SELECT pg_temp.run(3600) AS b2 \gset
SELECT pg_temp.run(3600) AS b3 \gset
CREATE TEMP TABLE got1 AS
    SELECT * FROM runq.complete_and_claim(:a, 1, '{"answer": 42}', ARRAY[3600], 'w-next',
                                          interval '10 minutes', 2);
SELECT results_eq('SELECT completed, run_id, epoch, attempt, resumed FROM got1 ORDER BY run_id',
                  format('VALUES (true, %s::bigint, 1::bigint, 1, false), (true, %s, 1, 1, false)', :b1, :b2),
                  'the run completes, and the two oldest runs of the class are claimed, each row saying completed');
SELECT results_eq(format('SELECT status, result FROM runq.get_run(%s)', :a),
                  $$VALUES ('succeeded'::text, '{"answer": 42}'::jsonb)$$, 'the completed run succeeded with its result');
SELECT is(pg_temp.events(:a), ARRAY['run.created@0', 'run.claimed@1', 'run.succeeded@1'],
          'the completed run logged one run.succeeded');
SELECT is(pg_temp.events(:b1), ARRAY['run.created@0', 'run.claimed@1'], 'the claimed run logged run.claimed');
SELECT results_eq(format('SELECT lease_owner::text, status::text FROM runq.runs WHERE run_id IN (%s, %s)', :b1, :b2),
                  $$VALUES ('w-next'::text, 'running'::text), ('w-next', 'running')$$,
                  'claimed for the worker named');
SELECT ok((SELECT bool_and(lease_expires_at BETWEEN now() + interval '9 minutes' AND clock_timestamp() + interval '10 minutes')
             FROM got1), 'with the lease given');
SELECT is(pg_temp.status(:b3), 'queued', 'max_runs: the third run stays queued');
SELECT is((SELECT count(*)::int FROM got1 WHERE tenant_id = 'cc-a' AND kind = 'cc-k' AND priority = 3600
                                          AND payload = '{}' AND inputs = '[]' AND checkpoint IS NULL
                                          AND usage = '{}' AND budget IS NULL AND deadline IS NULL),
          2, 'the claim''s columns as runq.claim gives them');

-- Nothing left to claim: one row, the completion's answer and NULLs.
SELECT runq.complete(:b2, 1) AS b2_done \gset
SELECT pg_temp.running(3601) AS c \gset
SELECT results_eq(format('SELECT completed, run_id, epoch, kind, lease_expires_at FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3601])', :c),
                  $$VALUES (true, NULL::bigint, NULL::bigint, NULL::text, NULL::timestamptz)$$,
                  'nothing to claim: one row, completed true and NULL elsewhere');
SELECT is(pg_temp.status(:c), 'succeeded', 'and the run succeeded');

-- A NULL run_id and epoch: a claim only.
SELECT pg_temp.run(3602) AS d \gset
SELECT results_eq('SELECT completed, run_id, epoch FROM runq.complete_and_claim(NULL, NULL, NULL, ARRAY[3602])',
                  format('VALUES (NULL::boolean, %s::bigint, 1::bigint)', :d),
                  'NULL run_id and epoch: nothing completed (completed NULL), the run claimed');
SELECT results_eq('SELECT completed, run_id FROM runq.complete_and_claim(NULL, NULL, NULL, ARRAY[3602])',
                  $$VALUES (NULL::boolean, NULL::bigint)$$,
                  'NULL run_id and epoch, nothing to claim: one row of NULLs');

-- kinds: only those kinds, as claim takes them.
SELECT pg_temp.running(3603) AS e \gset
SELECT pg_temp.run(3603, p_kind => 'cc-other') AS e_other \gset
SELECT pg_temp.run(3603, p_kind => 'cc-mine') AS e_mine \gset
SELECT results_eq(format($$SELECT completed, run_id, kind FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3603],
                                                                                      kinds => ARRAY['cc-mine'])$$, :e),
                  format($$VALUES (true, %s::bigint, 'cc-mine'::text)$$, :e_mine),
                  'kinds: the run of the kind named, past an older run of another kind');
SELECT is(pg_temp.status(:e_other), 'queued', 'kinds: the other kind keeps its place');

-- A resumed run comes with its checkpoint and its inputs, as claim gives them.
SELECT pg_temp.running(3604) AS f \gset
SELECT pg_temp.running(3605) AS g \gset
SELECT is(runq.checkpoint(:g, 1, '{"step": 3}') AND runq.ask_user(:g, 1, '{"q": "go on?"}'), true,
          'resumed: a run checkpoints and asks its user');
SELECT is(runq.deliver_input(:g, '{"a": "yes"}'), true, 'resumed: the answer requeues it');
SELECT results_eq(format('SELECT completed, run_id, epoch, attempt, resumed, checkpoint, inputs FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3605])', :f),
                  format($$VALUES (true, %s::bigint, 2::bigint, 1, true, '{"step": 3}'::jsonb, '[{"a": "yes"}]'::jsonb)$$, :g),
                  'resumed: the run comes back under epoch 2 (attempt 1: an answer is no retry) with its checkpoint and the input after it');

-- A cancel flag does not stop a completion: the work is done.
SELECT pg_temp.running(3606) AS h \gset
SELECT pg_temp.run(3606) AS h_next \gset
SELECT is(runq.cancel(:h, 'enough'), 'cancel_requested', 'cancel: requested of a running run');
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3606])', :h),
                  format('VALUES (true, %s::bigint)', :h_next),
                  'cancel: the completion still applies, and the next run is claimed');

-- ---------------------------------------------------------------------------
-- Fenced
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3610) AS s \gset
SELECT is(runq.release(:s, 1), true, 'fenced: epoch 1 gives its lease back');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[3610], 'w-new')), 1, 'fenced: another worker takes it, epoch 2');
SELECT pg_temp.run(3610) AS s_next \gset
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3610])', :s),
                  $$VALUES (false, NULL::bigint)$$,
                  'fenced: completed false, and nothing claimed');
SELECT is(pg_temp.status(:s_next), 'queued', 'fenced: the next run stays queued');
SELECT results_eq(format('SELECT status::text, lease_epoch::bigint FROM runq.runs WHERE run_id = %s', :s),
                  $$VALUES ('running'::text, 2::bigint)$$, 'fenced: the run goes on under epoch 2');
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3610])', :s),
                  $$VALUES (false, NULL::bigint)$$, 'fenced: again false');
SELECT is((SELECT count(*)::int FROM runq.run_events(:s) WHERE type = 'run.fenced' AND epoch = 1), 1,
          'fenced: exactly one run.fenced for epoch 1 after two calls');
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3610], claim_if_fenced => true)', :s),
                  format('VALUES (false, %s::bigint)', :s_next),
                  'claim_if_fenced: completed false, and the next run claimed all the same');
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 7, NULL, ARRAY[3610])', :s),
                  $$VALUES (false, NULL::bigint)$$, 'an epoch the run never had: false as well');

-- ---------------------------------------------------------------------------
-- A slot the completion frees is there for its claim
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'cc-limited', 1);
SELECT pg_temp.running(3620, 'cc-limited') AS l1 \gset
SELECT pg_temp.run(3620, 'cc-limited') AS l2 \gset
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[3620])), 0, 'limit: the tenant''s second run waits for the slot');
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3620])', :l1),
                  format('VALUES (true, %s::bigint)', :l2),
                  'limit: completing the first hands its slot to the second, which the same call claims');
SELECT is((SELECT running::int FROM runq.limits WHERE scope = 'tenant' AND key = 'cc-limited'), 1,
          'limit: one running run of the tenant, never two');
SELECT runq.set_limit('tenant', 'cc-limited', NULL);

-- ---------------------------------------------------------------------------
-- Errors change nothing
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3630) AS x \gset
SELECT pg_temp.run(3630) AS x_next \gset
SELECT pg_temp.state() AS before_errors \gset
SELECT throws_ok(format('SELECT * FROM runq.complete_and_claim(%s, 1, NULL, NULL)', :x), '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got NULL',
                 'classes NULL: 22023 naming it');
SELECT throws_ok(format($$SELECT * FROM runq.complete_and_claim(%s, 1, NULL, '{}')$$, :x), '22023', NULL,
                 'classes empty: 22023');
SELECT throws_ok(format('SELECT * FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3630], max_runs => 0)', :x), '22023',
                 'max_runs must be at least 1, got 0', 'max_runs 0: 22023 naming it');
SELECT throws_ok(format($$SELECT * FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3630], lease => interval '-1 second')$$, :x),
                 '22023', NULL, 'a negative lease: 22023');
SELECT throws_ok(format($$SELECT * FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3630], kinds => '{}')$$, :x),
                 '22023', NULL, 'kinds empty: 22023');
SELECT throws_ok(format('SELECT * FROM runq.complete_and_claim(%s, NULL, NULL, ARRAY[3630])', :x), '22023',
                 'epoch must be given, got NULL', 'a run_id without an epoch: 22023 naming epoch');
SELECT throws_ok('SELECT * FROM runq.complete_and_claim(NULL, 1, NULL, ARRAY[3630])', '22023',
                 'run_id must be given, got NULL', 'an epoch without a run_id: 22023 naming run_id');
SELECT throws_ok('SELECT * FROM runq.complete_and_claim(-3630, 1, NULL, ARRAY[3630])', 'RQ003',
                 'run -3630 not found', 'no such run: RQ003 naming it');
SELECT is(pg_temp.state(), :'before_errors', 'the rejected calls changed nothing: no completion, no claim, no event');
SELECT is(pg_temp.status(:x_next), 'queued', 'and the next run is still queued');

SELECT * FROM finish();
ROLLBACK;
