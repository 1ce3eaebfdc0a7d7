-- The journal of a run's model requests. runq.record_model_call(run_id,
-- epoch, seq, request_hash, response, usage) stores one row per run, seq and
-- epoch: applied (true) when the run is running under epoch, and then its
-- usage is added to the run's totals as runq.record_usage adds it (one
-- run.usage under epoch); a stale epoch, or a run no longer running, gets
-- false, its row kept not applied, its usage still added, and one run.fenced
-- per run and epoch (operation record_model_call). A resend of the same run,
-- seq and epoch records nothing twice: the same answer, no second row, no
-- usage added again; a resend with another request_hash is refused (RQ004).
-- A request is applied under one epoch at most: a later epoch holding the
-- run that journals a seq already applied is refused (RQ004: replay it), and
-- model_calls_applied_key stands behind that. Neither a cancel flag, a deadline passed nor a spent budget stops
-- it (begin_turn does). Arguments first: 22023 for a bad seq, request_hash,
-- response, usage or epoch (NULL, 0, negative, above the run's current one),
-- then RQ003 for no such run (22023 for a NULL run_id, as in every lookup);
-- a refused call changes nothing. runq.model_calls(run_id) reads the journal
-- in seq then epoch order, every column, RQ003 for no such run. The table:
-- its key, the partial unique index, the foreign key's cascade (purge takes
-- the rows with the run) and its checks. Grants: who may journal and read,
-- no table privilege for anyone, SECURITY DEFINER with a pinned search_path.
-- Classes 3900..3999; tenant 'mc'.
BEGIN;
SELECT plan(166);

\ir helpers/recovery.sql

-- A queued run of this file's class p_class; its id.
CREATE FUNCTION pg_temp.run(p_class integer, p_timeout interval DEFAULT NULL,
                            p_budget jsonb DEFAULT NULL) RETURNS bigint LANGUAGE sql AS $$
    SELECT s.run_id FROM runq.submit(tenant_id => 'mc', kind => 'k', priority => p_class,
                                     timeout => p_timeout, budget => p_budget) AS s
$$;
-- A run claimed under epoch 1 with an hour's lease.
CREATE FUNCTION pg_temp.running(p_class integer, p_timeout interval DEFAULT NULL,
                                p_budget jsonb DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint := pg_temp.run(p_class, p_timeout, p_budget);
BEGIN
    PERFORM FROM runq.claim(ARRAY[p_class], 'w-mc', interval '1 hour') AS c
     WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;
-- The run's lease expires, the sweep requeues it (policy resume), its
-- backoff is skipped and it is claimed again; the epoch of that claim.
CREATE FUNCTION pg_temp.reclaimed(p_run bigint, p_class integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_epoch bigint;
BEGIN
    UPDATE runq.runs SET lease_expires_at = now() - interval '1 second'
     WHERE run_id = p_run AND status = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % is not running', p_run;
    END IF;
    PERFORM FROM runq.sweep() AS s WHERE s.run_id = p_run AND s.action = 'requeued';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: the sweep did not requeue run %', p_run;
    END IF;
    UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = p_run;  -- skip the backoff
    SELECT c.epoch INTO v_epoch FROM runq.claim(ARRAY[p_class], 'w-mc-2', interval '1 hour') AS c
     WHERE c.run_id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed again', p_run;
    END IF;
    RETURN v_epoch;
END
$$;
-- The journal of a run, read from the table (not through runq.model_calls),
-- as 'seq@epoch applied|stale request_hash' in seq, then epoch order.
CREATE FUNCTION pg_temp.calls(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(format('%s@%s %s %s', m.seq, m.epoch,
                                     CASE WHEN m.applied THEN 'applied' ELSE 'stale' END, m.request_hash)
                              ORDER BY m.seq, m.epoch), '{}')
      FROM runq.model_calls AS m WHERE m.run_id = p_run
$$;
-- A run's usage totals as get_run shows them.
CREATE FUNCTION pg_temp.usage(p_run bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT r.usage FROM runq.get_run(p_run) AS r
$$;
-- A run's run.usage events as 'payload@epoch', in order.
CREATE FUNCTION pg_temp.usage_events(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(e.payload::text || '@' || e.epoch ORDER BY e.event_id), '{}')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.usage'
$$;
-- A run's run.fenced events as 'operation@epoch', in order.
CREATE FUNCTION pg_temp.fenced(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((e.payload ->> 'operation') || '@' || e.epoch ORDER BY e.event_id), '{}')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.fenced'
$$;
CREATE FUNCTION pg_temp.status(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT g.status FROM runq.get_run(p_run) AS g
$$;
-- Everything runq keeps about a run that these calls could touch: its row,
-- its events, its usage totals and its journal.
CREATE FUNCTION pg_temp.state(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT row_to_json(r)::text FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e WHERE e.run_id = p_run),
        (SELECT row_to_json(u)::text FROM runq.run_usage AS u WHERE u.run_id = p_run),
        (SELECT json_agg(m ORDER BY m.seq, m.epoch)::text FROM runq.model_calls AS m WHERE m.run_id = p_run))
$$;
CREATE TEMP TABLE before (run_id bigint PRIMARY KEY, s text) ON COMMIT DROP;
-- Remembers a run's state, to compare with pg_temp.state later.
CREATE FUNCTION pg_temp.remember(p_run bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO before VALUES (p_run, pg_temp.state(p_run))
        ON CONFLICT (run_id) DO UPDATE SET s = excluded.s;
$$;
CREATE FUNCTION pg_temp.remembered(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT b.s FROM before AS b WHERE b.run_id = p_run
$$;

-- fixture: no old finished runs, so that purge's count below is this file's
-- (rolled back with everything else).
SELECT runq.purge(interval '1 day', 2147483647, true) AS pre_purged \gset

-- ---------------------------------------------------------------------------
-- The signatures
-- ---------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb)'::regprocedure),
          'run_id bigint, epoch bigint, seq bigint, request_hash text, response jsonb, usage jsonb DEFAULT NULL::jsonb',
          'record_model_call: its parameter names, types and the default of usage');
SELECT is(pg_catalog.pg_get_function_result('runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb)'::regprocedure),
          'boolean', 'record_model_call returns boolean');
SELECT is(pg_catalog.pg_get_function_result('runq.model_calls(bigint)'::regprocedure),
          'TABLE(seq bigint, epoch bigint, applied boolean, request_hash text, response jsonb, usage jsonb, created_at timestamp with time zone)',
          'model_calls returns seq, epoch, applied, request_hash, response, usage, created_at');

-- ---------------------------------------------------------------------------
-- The holder: applied, usage added once, one run.usage under its epoch
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3900) AS a \gset
SELECT updated_at AS a_updated FROM runq.runs WHERE run_id = :a \gset
SELECT is(runq.record_model_call(:a, 1, 1, 'h1', '{"text": "hi"}', '{"input_tokens": 100, "cost_usd": 0.01}'), true,
          'the holder journals request 1 with its usage: true');
SELECT results_eq(format('SELECT seq, epoch::bigint, applied, request_hash, response, usage FROM runq.model_calls WHERE run_id = %s', :a),
                  $$VALUES (1::bigint, 1::bigint, true, 'h1'::text, '{"text": "hi"}'::jsonb,
                            '{"input_tokens": 100, "cost_usd": 0.01}'::jsonb)$$,
                  'one row: seq 1 under epoch 1, applied, with the hash, response and usage given');
SELECT ok((SELECT bool_and(m.created_at BETWEEN now() AND clock_timestamp()) FROM runq.model_calls AS m WHERE m.run_id = :a),
          'created_at is the time of the call');
SELECT is(pg_temp.usage(:a), '{"input_tokens": 100, "cost_usd": 0.01}'::jsonb, 'the usage is added to the run''s totals');
SELECT is((SELECT u.usage FROM runq.run_usage AS u WHERE u.run_id = :a), '{"input_tokens": 100, "cost_usd": 0.01}'::jsonb,
          'runq.run_usage holds the same totals');
SELECT is(pg_temp.events(:a), ARRAY['run.created@0', 'run.claimed@1', 'run.usage@1'],
          'one run.usage under epoch 1, nothing else logged');
SELECT is(pg_temp.usage_events(:a), ARRAY['{"cost_usd": 0.01, "input_tokens": 100}@1'],
          'the run.usage payload is the usage given');
SELECT results_eq(format('SELECT status::text, lease_epoch::bigint, updated_at FROM runq.runs WHERE run_id = %s', :a),
                  format($$VALUES ('running'::text, 1::bigint, %L::timestamptz)$$, :'a_updated'),
                  'the run is still running under epoch 1, updated_at as before');

SELECT is(runq.record_model_call(:a, 1, 2, 'h2', '"plain text"'), true, 'request 2 without usage (its default, NULL): true');
SELECT results_eq(format('SELECT seq, epoch::bigint, applied, request_hash, response, usage FROM runq.model_calls WHERE run_id = %s AND seq = 2', :a),
                  $$VALUES (2::bigint, 1::bigint, true, 'h2'::text, '"plain text"'::jsonb, NULL::jsonb)$$,
                  'its row is applied, usage NULL');
SELECT is(pg_temp.usage(:a), '{"input_tokens": 100, "cost_usd": 0.01}'::jsonb, 'usage NULL adds nothing to the totals');
SELECT is(pg_temp.events(:a), ARRAY['run.created@0', 'run.claimed@1', 'run.usage@1'], 'and logs no run.usage');
-- JSON null is a response; only SQL NULL is refused. 256 characters is the
-- longest hash.
SELECT is(runq.record_model_call(:a, 1, 3, repeat('x', 256), 'null'), true,
          'request 3: a JSON null response and a hash of 256 characters: true');
SELECT is(pg_temp.calls(:a), ARRAY['1@1 applied h1', '2@1 applied h2', '3@1 applied ' || repeat('x', 256)],
          'three requests journaled, all applied');

-- A resend after a lost connection: the same answer, nothing twice.
SELECT pg_temp.remember(:a);
SELECT is(runq.record_model_call(:a, 1, 1, 'h1', '{"text": "hi"}', '{"input_tokens": 100, "cost_usd": 0.01}'), true,
          'resend of request 1 under epoch 1: true again');
SELECT is(runq.record_model_call(:a, 1, 1, 'h1', '{"text": "hi"}', '{"input_tokens": 100, "cost_usd": 0.01}'), true,
          'and a third time: true');
SELECT is(runq.record_model_call(:a, 1, 2, 'h2', '"plain text"'), true, 'resend of request 2: true');
SELECT is(pg_temp.state(:a), pg_temp.remembered(:a), 'the resends changed nothing: no row, no usage, no event');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 2, 'h2-other', '"plain text"')$$, :a), 'RQ004',
                 format('model request 2 of run %s under epoch 1 was recorded with another request_hash (h2)', :a),
                 'a resend of request 2 with another request_hash: RQ004');
SELECT is(pg_temp.state(:a), pg_temp.remembered(:a), 'the refused resend changed nothing');
SELECT is((SELECT count(*)::int FROM runq.model_calls AS m WHERE m.run_id = :a AND m.seq = 1), 1, 'still one row for request 1');
SELECT is(pg_temp.usage(:a), '{"input_tokens": 100, "cost_usd": 0.01}'::jsonb, 'the totals are not added to twice');
SELECT is(pg_temp.usage_events(:a), ARRAY['{"cost_usd": 0.01, "input_tokens": 100}@1'], 'still one run.usage');

-- ---------------------------------------------------------------------------
-- runq.model_calls
-- ---------------------------------------------------------------------------
SELECT results_eq(format('SELECT * FROM runq.model_calls(%s)', :a),
                  format('SELECT m.seq, m.epoch::bigint, m.applied, m.request_hash, m.response, m.usage, m.created_at
                            FROM runq.model_calls AS m WHERE m.run_id = %s ORDER BY m.seq', :a),
                  'model_calls: every column as stored, in seq order');
SELECT results_eq(format('SELECT seq, epoch, applied, request_hash, response, usage FROM runq.model_calls(%s)', :a),
                  $$VALUES (1::bigint, 1::bigint, true, 'h1'::text, '{"text": "hi"}'::jsonb, '{"input_tokens": 100, "cost_usd": 0.01}'::jsonb),
                           (2, 1, true, 'h2', '"plain text"', NULL),
                           (3, 1, true, repeat('x', 256), 'null', NULL)$$,
                  'model_calls: the values given');
SELECT pg_temp.run(3901) AS q0 \gset
SELECT is_empty(format('SELECT * FROM runq.model_calls(%s)', :q0), 'model_calls of a run without calls: no rows, no error');
SELECT throws_ok('SELECT * FROM runq.model_calls(-3900)', 'RQ003', 'run -3900 not found',
                 'model_calls: no such run is RQ003 naming it');
SELECT throws_ok('SELECT * FROM runq.model_calls(9223372036854775807)', 'RQ003', 'run 9223372036854775807 not found',
                 'model_calls: the largest bigint is RQ003 too');
-- docs/contract.md, Arguments: a NULL run_id is a bad argument in every function.
SELECT throws_ok('SELECT * FROM runq.model_calls(NULL)', '22023', 'run_id must be given, got NULL',
                 'model_calls: a NULL run_id is a bad argument (22023), as in every lookup');

-- ---------------------------------------------------------------------------
-- Fenced: a stale epoch's row is kept, not applied; its usage counts
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3902) AS f \gset
SELECT is(runq.record_model_call(:f, 1, 1, 'f1', '{"n": 1}', '{"tokens": 10}'), true, 'epoch 1 journals request 1');
SELECT is(runq.record_model_call(:f, 1, 2, 'f2', '{"n": 2}'), true, 'and request 2');
SELECT is(pg_temp.reclaimed(:f, 3902), 2::bigint,
          'fixture: the lease expired, the sweep requeued the run, and it was claimed again under epoch 2');
SELECT is(runq.record_model_call(:f, 2, 3, 'f3-e2', '{"n": 3}', '{"tokens": 20}'), true, 'epoch 2 journals request 3');
SELECT is(runq.record_model_call(:f, 1, 3, 'f3-e1', '{"n": "3 stale"}', '{"tokens": 5}'), false,
          'the stale epoch 1 journals request 3: false');
SELECT results_eq(format('SELECT applied, request_hash, response, usage FROM runq.model_calls WHERE run_id = %s AND seq = 3 AND epoch = 1', :f),
                  $$VALUES (false, 'f3-e1'::text, '{"n": "3 stale"}'::jsonb, '{"tokens": 5}'::jsonb)$$,
                  'its row is kept, not applied, with its hash, response and usage');
SELECT is(pg_temp.usage(:f), '{"tokens": 35}'::jsonb, 'its usage is added to the totals all the same: 10 + 20 + 5');
SELECT is(pg_temp.usage_events(:f), ARRAY['{"tokens": 10}@1', '{"tokens": 20}@2', '{"tokens": 5}@1'],
          'and logged as run.usage under the stale epoch 1');
SELECT is(pg_temp.fenced(:f), ARRAY['record_model_call@1'], 'one run.fenced for epoch 1, operation record_model_call');
SELECT is((SELECT e.payload FROM runq.run_events(:f) AS e WHERE e.type = 'run.fenced'),
          '{"operation": "record_model_call", "current_epoch": 2, "status": "running"}'::jsonb,
          'the run.fenced payload: operation record_model_call, the current epoch and status');
SELECT results_eq(format('SELECT status::text, lease_epoch::bigint FROM runq.runs WHERE run_id = %s', :f),
                  $$VALUES ('running'::text, 2::bigint)$$, 'the run goes on under epoch 2');

SELECT pg_temp.remember(:f);
SELECT is(runq.record_model_call(:f, 1, 3, 'f3-e1', '{"n": "3 stale"}', '{"tokens": 5}'), false,
          'the stale call sent again: false again');
SELECT is(pg_temp.state(:f), pg_temp.remembered(:f), 'the stale resend changed nothing: no row, no usage, no second run.fenced');
SELECT is(runq.record_model_call(:f, 1, 4, 'f4-e1', '{"n": "4 stale"}'), false, 'the stale epoch journals request 4, no usage: false');
SELECT is((SELECT count(*)::int FROM runq.run_events AS e WHERE e.run_id = :f AND e.type = 'run.fenced' AND e.epoch = 1), 1,
          'still one run.fenced for epoch 1');
-- A stale row is no applied row: the holder journals the same seq.
SELECT is(runq.record_model_call(:f, 2, 4, 'f4-e2', '{"n": 4}'), true, 'epoch 2 journals request 4 too: true');
SELECT is(pg_temp.calls(:f), ARRAY['1@1 applied f1', '2@1 applied f2', '3@1 stale f3-e1', '3@2 applied f3-e2',
                                   '4@1 stale f4-e1', '4@2 applied f4-e2'],
          'the journal: epoch 1''s requests applied before the takeover, stale after it; epoch 2''s applied');
SELECT results_eq(format('SELECT seq, epoch, applied, request_hash FROM runq.model_calls(%s)', :f),
                  $$VALUES (1::bigint, 1::bigint, true, 'f1'::text), (2, 1, true, 'f2'), (3, 1, false, 'f3-e1'),
                           (3, 2, true, 'f3-e2'), (4, 1, false, 'f4-e1'), (4, 2, true, 'f4-e2')$$,
                  'model_calls: seq order, then epoch (not the order written)');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 0, 'x', '{}')$$, :f), '22023',
                 'seq must be at least 1, got 0', 'a stale worker''s bad seq is 22023 all the same: arguments first');

-- The stale epoch's first call without usage: operation record_model_call too.
SELECT pg_temp.running(3903) AS g \gset
SELECT is(pg_temp.reclaimed(:g, 3903), 2::bigint, 'fixture: another run taken over by epoch 2');
SELECT is(runq.record_model_call(:g, 1, 1, 'g1', '{}'), false, 'its stale epoch 1 journals request 1 without usage: false');
SELECT is(pg_temp.calls(:g), ARRAY['1@1 stale g1'], 'the row is kept, not applied');
SELECT is(pg_temp.fenced(:g), ARRAY['record_model_call@1'], 'one run.fenced for epoch 1, operation record_model_call');
SELECT is(pg_temp.usage_events(:g), '{}'::text[], 'no usage, no run.usage');

-- ---------------------------------------------------------------------------
-- A run no longer running, under its last epoch: false, kept, not applied
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3904) AS r \gset
SELECT is(runq.release(:r, 1), true, 'fixture: epoch 1 gives the run back (queued under epoch 1)');
SELECT is(runq.record_model_call(:r, 1, 1, 'r1', '{}'), false, 'a queued run under its last epoch: false');
SELECT is(pg_temp.calls(:r), ARRAY['1@1 stale r1'], 'the row is kept, not applied');
SELECT is((SELECT e.payload FROM runq.run_events(:r) AS e WHERE e.type = 'run.fenced'),
          '{"operation": "record_model_call", "current_epoch": 1, "status": "queued"}'::jsonb,
          'one run.fenced: operation record_model_call, the run queued');
SELECT is(pg_temp.status(:r), 'queued', 'the run stays queued');

SELECT pg_temp.running(3905) AS s \gset
SELECT is(runq.record_model_call(:s, 1, 1, 's1', '{"n": 1}', '{"tokens": 1}'), true, 'the holder journals request 1');
SELECT is(runq.complete(:s, 1, '{"done": true}'), true, 'fixture: and the run succeeds');
SELECT is(runq.record_model_call(:s, 1, 2, 's2', '{"n": 2}'), false, 'a succeeded run under its last epoch: false');
SELECT is(runq.record_model_call(:s, 1, 3, 's3', '{"n": 3}', '{"tokens": 2}'), false, 'and with usage: false');
SELECT is(pg_temp.calls(:s), ARRAY['1@1 applied s1', '2@1 stale s2', '3@1 stale s3'],
          'the rows after the end are kept, not applied');
SELECT is(pg_temp.usage(:s), '{"tokens": 3}'::jsonb, 'the usage after the end is added: spend is a fact');
SELECT is(pg_temp.fenced(:s), ARRAY['record_model_call@1'], 'one run.fenced for epoch 1, operation record_model_call');
SELECT is((SELECT e.payload ->> 'status' FROM runq.run_events(:s) AS e WHERE e.type = 'run.fenced'), 'succeeded',
          'the run.fenced says the run succeeded');
SELECT results_eq(format('SELECT status, result FROM runq.get_run(%s)', :s),
                  $$VALUES ('succeeded'::text, '{"done": true}'::jsonb)$$, 'the run is still succeeded, its result as it was');

-- ---------------------------------------------------------------------------
-- Applied under one epoch at most: model_calls_applied_key
-- ---------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_indexdef('runq.model_calls_applied_key'::regclass),
          'CREATE UNIQUE INDEX model_calls_applied_key ON runq.model_calls USING btree (run_id, seq) WHERE applied',
          'model_calls_applied_key: unique (run_id, seq) where applied');
SELECT pg_temp.running(3906) AS k \gset
SELECT is(runq.record_model_call(:k, 1, 1, 'k1', '{"a": 1}', '{"tokens": 7}'), true, 'epoch 1 journals request 1, applied');
SELECT is(pg_temp.reclaimed(:k, 3906), 2::bigint, 'fixture: the run is taken over by epoch 2');
SELECT pg_temp.remember(:k);
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 2, 1, 'k1', '{"a": 1}', '{"tokens": 7}')$$, :k), 'RQ004',
                 format('model request 1 of run %s was recorded under epoch 1 already', :k),
                 'epoch 2 journaling request 1, applied under epoch 1, while holding the run: RQ004');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 2, 1, 'k1-other', '{"a": 2}')$$, :k), 'RQ004',
                 format('model request 1 of run %s was recorded under epoch 1 already', :k),
                 'and without usage, another request: RQ004 too');
SELECT is(pg_temp.state(:k), pg_temp.remembered(:k), 'the refused calls changed nothing: no row, no usage, no event');
SELECT is(runq.record_model_call(:k, 2, 2, 'k2', '{"a": 3}'), true, 'epoch 2 journals request 2, which epoch 1 never sent');
SELECT is(pg_temp.calls(:k), ARRAY['1@1 applied k1', '2@2 applied k2'], 'each request applied once, under one epoch');

-- ---------------------------------------------------------------------------
-- Not stopped by a cancel flag, a deadline passed or a spent budget
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3907) AS c \gset
SELECT is(runq.cancel(:c, 'enough'), 'cancel_requested', 'cancel: requested of the running run');
SELECT is(runq.record_model_call(:c, 1, 1, 'c1', '{}', '{"tokens": 3}'), true,
          'cancel: the holder''s record_model_call is not stopped: true');
SELECT is(pg_temp.status(:c), 'running', 'cancel: the run is still running');
SELECT is(pg_temp.calls(:c), ARRAY['1@1 applied c1'], 'cancel: the row is applied');
SELECT is(pg_temp.events(:c), ARRAY['run.created@0', 'run.claimed@1', 'run.cancel_requested@1', 'run.usage@1'],
          'cancel: its usage logged, no run.cancelled, no run.fenced');
SELECT is(runq.begin_turn(:c, 1), false, 'cancel: begin_turn, by contrast, stops it: false');
SELECT is(pg_temp.status(:c), 'cancelled', 'cancel: and the run is cancelled');

SELECT pg_temp.running(3908, interval '1 hour') AS d \gset
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = :d;
SELECT is(runq.record_model_call(:d, 1, 1, 'd1', '{}', '{"tokens": 4}'), true,
          'deadline: record_model_call past it is not stopped: true');
SELECT is(pg_temp.status(:d), 'running', 'deadline: the run is still running');
SELECT is(pg_temp.calls(:d), ARRAY['1@1 applied d1'], 'deadline: the row is applied');
SELECT is(runq.begin_turn(:d, 1), false, 'deadline: begin_turn stops it: false');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :d),
                  $$VALUES ('failed'::text, 'deadline_exceeded'::text)$$, 'deadline: the run failed with deadline_exceeded');

SELECT pg_temp.running(3909, NULL, '{"tokens": 10}') AS b \gset
SELECT is(runq.record_model_call(:b, 1, 1, 'b1', '{}', '{"tokens": 50}'), true, 'budget: a request over the budget: true');
SELECT is(runq.record_model_call(:b, 1, 2, 'b2', '{}', '{"tokens": 50}'), true, 'budget: and another at a spent budget: true');
SELECT is(pg_temp.usage(:b), '{"tokens": 100}'::jsonb, 'budget: both usages added');
SELECT is(pg_temp.status(:b), 'running', 'budget: the run is still running');
SELECT is(runq.begin_turn(:b, 1), false, 'budget: begin_turn stops it: false');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :b),
                  $$VALUES ('failed'::text, 'budget_exhausted'::text)$$, 'budget: the run failed with budget_exhausted');

-- ---------------------------------------------------------------------------
-- Bad arguments: 22023 before the run is looked at; RQ003; nothing changed
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3910) AS e \gset
SELECT pg_temp.remember(:e);
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, NULL, 'x', '{}')$$, :e), '22023',
                 'seq must be at least 1, got NULL', 'seq NULL is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 0, 'x', '{}')$$, :e), '22023',
                 'seq must be at least 1, got 0', 'seq 0 is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, -1, 'x', '{}')$$, :e), '22023',
                 'seq must be at least 1, got -1', 'a negative seq is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, NULL, '{}')$$, :e), '22023',
                 'request_hash must be a non-empty text of at most 256 characters, got NULL', 'request_hash NULL is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, '', '{}')$$, :e), '22023',
                 'request_hash must be a non-empty text of at most 256 characters, got ', 'an empty request_hash is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, repeat('y', 257), '{}')$$, :e), '22023',
                 'request_hash must be a non-empty text of at most 256 characters, got ' || repeat('y', 200),
                 'a request_hash of 257 characters is 22023, the value cut to 200');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, 'x', NULL)$$, :e), '22023',
                 'response must be a jsonb value, got NULL', 'response NULL is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, 'x', '{}', '{}')$$, :e), '22023',
                 'usage must be NULL or a non-empty object of non-negative numbers, got {}', 'usage {} is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, 'x', '{}', '{"a": -1}')$$, :e), '22023',
                 'usage must be NULL or a non-empty object of non-negative numbers, got {"a": -1}', 'a negative usage is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, 'x', '{}', '[]')$$, :e), '22023',
                 'usage must be NULL or a non-empty object of non-negative numbers, got []', 'a usage array is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, 'x', '{}', '{"a": "1"}')$$, :e), '22023',
                 'usage must be NULL or a non-empty object of non-negative numbers, got {"a": "1"}', 'a usage value that is no number is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, NULL, 1, 'x', '{}')$$, :e), '22023',
                 'epoch must be given, got NULL', 'epoch NULL is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 0, 1, 'x', '{}')$$, :e), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 1, got 0', :e), 'epoch 0 is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, -1, 1, 'x', '{}')$$, :e), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 1, got -1', :e), 'a negative epoch is 22023');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 2, 1, 'x', '{}')$$, :e), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 1, got 2', :e),
                 'an epoch above the run''s current one is 22023');
SELECT is(pg_temp.state(:e), pg_temp.remembered(:e), 'the refused calls changed nothing: no row, no usage, no event');
SELECT is_empty(format('SELECT * FROM runq.model_calls(%s)', :e), 'and model_calls has nothing for the run');
SELECT is(runq.record_model_call(:e, 1, 1, 'x', '{}'), true, 'the same call with good arguments: true');

SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 1, 'x', '{}')$$, :q0), '22023',
                 format('epoch must be an epoch run %s was claimed with (it never was), got 1', :q0),
                 'a run never claimed has no epoch to give: 22023');
SELECT is(pg_temp.calls(:q0), '{}'::text[], 'and nothing was stored');
SELECT throws_ok($$SELECT runq.record_model_call(-3900, 1, 1, 'x', '{}')$$, 'RQ003', 'run -3900 not found',
                 'no such run is RQ003 naming it');
SELECT throws_ok($$SELECT runq.record_model_call(0, 1, 1, 'x', '{}', '{"tokens": 1}')$$, 'RQ003', 'run 0 not found',
                 'run 0, with usage: RQ003');
SELECT throws_ok($$SELECT runq.record_model_call(9223372036854775807, 1, 1, 'x', '{}')$$, 'RQ003',
                 'run 9223372036854775807 not found', 'the largest bigint: RQ003');
SELECT throws_ok($$SELECT runq.record_model_call(NULL, 1, 1, 'x', '{}')$$, '22023', 'run_id must be given, got NULL',
                 'a NULL run_id is a bad argument (22023), as in every lookup');
SELECT throws_ok($$SELECT runq.record_model_call(-3900, 1, 0, 'x', '{}')$$, '22023', 'seq must be at least 1, got 0',
                 'a bad argument for no such run is still 22023: arguments first');
SELECT throws_ok($$SELECT runq.record_model_call(-3900, NULL, 1, 'x', '{}')$$, '22023', 'epoch must be given, got NULL',
                 'epoch NULL for no such run: 22023');

-- ---------------------------------------------------------------------------
-- The table: its key, foreign key and checks
-- ---------------------------------------------------------------------------
SELECT col_is_pk('runq', 'model_calls', ARRAY['run_id', 'seq', 'epoch']::name[], 'model_calls: the key is (run_id, seq, epoch)');
SELECT is((SELECT string_agg(format('%s %s', c.confrelid::regclass, c.confdeltype), ', ')
             FROM pg_catalog.pg_constraint AS c
            WHERE c.conrelid = 'runq.model_calls'::regclass AND c.contype = 'f'),
          'runq.runs c', 'model_calls: one foreign key, to runq.runs, ON DELETE CASCADE');
SELECT throws_ok($$INSERT INTO runq.model_calls VALUES (-3900, 1, 1, true, now(), 'x', '{}', NULL)$$, '23503', NULL,
                 'a row for no run is refused (23503)');
SELECT throws_ok(format($$INSERT INTO runq.model_calls VALUES (%s, 0, 1, true, now(), 'x', '{}', NULL)$$, :e), '23514', NULL,
                 'the table refuses seq 0 (23514)');
SELECT throws_ok(format($$INSERT INTO runq.model_calls VALUES (%s, 9, 1, false, now(), '', '{}', NULL)$$, :e), '23514', NULL,
                 'the table refuses an empty request_hash (23514)');
SELECT throws_ok(format($$INSERT INTO runq.model_calls VALUES (%s, 9, 1, false, now(), repeat('z', 257), '{}', NULL)$$, :e),
                 '23514', NULL, 'the table refuses a request_hash of 257 characters (23514)');

-- ---------------------------------------------------------------------------
-- Purge takes the journal with the run
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3920) AS p \gset
SELECT is(runq.record_model_call(:p, 1, 1, 'p1', '{}', '{"tokens": 1}'), true, 'purge: a run journals request 1');
SELECT is(runq.record_model_call(:p, 1, 2, 'p2', '{}'), true, 'purge: and request 2');
SELECT is(runq.complete(:p, 1), true, 'purge: and succeeds');
SELECT is(runq.record_model_call(:p, 1, 3, 'p3', '{}'), false, 'purge: and a late one, kept not applied');
UPDATE runq.runs SET finished_at = now() - interval '2 days' WHERE run_id = :p;
SELECT is(runq.purge(interval '1 day'), 1::bigint, 'purge: the old run is purged');
SELECT is((SELECT count(*)::int FROM runq.model_calls AS m WHERE m.run_id = :p), 0, 'purge: its journal is gone');
SELECT throws_ok(format('SELECT * FROM runq.model_calls(%s)', :p), 'RQ003', format('run %s not found', :p),
                 'purge: model_calls of the purged run is RQ003');
SELECT is(pg_temp.calls(:s), ARRAY['1@1 applied s1', '2@1 stale s2', '3@1 stale s3'],
          'purge: a recent finished run''s journal is kept');
SELECT is(cardinality(pg_temp.calls(:f)), 6, 'purge: a running run''s journal is kept');

-- ---------------------------------------------------------------------------
-- Grants and security
-- ---------------------------------------------------------------------------
SELECT is_definer('runq', 'record_model_call', ARRAY['bigint', 'bigint', 'bigint', 'text', 'jsonb', 'jsonb']::name[],
                  'record_model_call is SECURITY DEFINER');
SELECT is_definer('runq', 'model_calls', ARRAY['bigint']::name[], 'model_calls is SECURITY DEFINER');
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc AS p
            WHERE p.oid = 'runq.record_model_call(bigint, bigint, bigint, text, jsonb, jsonb)'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp'], 'record_model_call pins search_path = pg_catalog, pg_temp');
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc AS p WHERE p.oid = 'runq.model_calls(bigint)'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp'], 'model_calls pins search_path = pg_catalog, pg_temp');

CREATE TEMP TABLE grants (fn name, argtypes name[], roles text[]) ON COMMIT DROP;
INSERT INTO grants VALUES
    ('record_model_call', ARRAY['bigint', 'bigint', 'bigint', 'text', 'jsonb', 'jsonb']::name[],
                          ARRAY['runq_admin', 'runq_worker']),
    ('model_calls',       ARRAY['bigint'], ARRAY['runq_admin', 'runq_observer', 'runq_worker']);
-- 2 x 5 = 10 tests.
SELECT function_privs_are('runq', g.fn, g.argtypes, r.role,
                          CASE WHEN r.role = ANY (g.roles) THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END,
                          format('%s %s execute runq.%s', r.role,
                                 CASE WHEN r.role = ANY (g.roles) THEN 'can' ELSE 'cannot' END, g.fn))
  FROM grants AS g,
       unnest(ARRAY['public', 'runq_client', 'runq_worker', 'runq_admin', 'runq_observer']) WITH ORDINALITY AS r (role, n)
 ORDER BY g.fn, r.n;
-- 5 tests: the table is the functions' alone.
SELECT table_privs_are('runq', 'model_calls', r.role, ARRAY[]::name[], format('%s has no privilege on runq.model_calls', r.role))
  FROM unnest(ARRAY['public', 'runq_client', 'runq_worker', 'runq_admin', 'runq_observer']) WITH ORDINALITY AS r (role, n)
 ORDER BY r.n;

-- And from outside, under SET ROLE.
SELECT pg_temp.running(3930) AS h \gset
SET ROLE runq_worker;
SELECT is(runq.record_model_call(:h, 1, 1, 'w1', '{"by": "worker"}', '{"tokens": 1}'), true, 'runq_worker journals a request');
SELECT results_eq(format('SELECT seq, applied FROM runq.model_calls(%s)', :h), 'VALUES (1::bigint, true)', 'runq_worker reads the journal');
RESET ROLE;
SET ROLE runq_admin;
SELECT is(runq.record_model_call(:h, 1, 2, 'a2', '{"by": "admin"}'), true, 'runq_admin journals a request');
SELECT results_eq(format('SELECT seq, applied FROM runq.model_calls(%s)', :h), 'VALUES (1::bigint, true), (2, true)',
                  'runq_admin reads the journal');
RESET ROLE;
SET ROLE runq_observer;
SELECT results_eq(format('SELECT seq, request_hash FROM runq.model_calls(%s)', :h), $$VALUES (1::bigint, 'w1'::text), (2, 'a2')$$,
                  'runq_observer reads the journal');
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 3, 'o3', '{}')$$, :h), '42501', NULL,
                 'runq_observer may not journal (42501)');
SELECT throws_ok(format('SELECT count(*) FROM runq.model_calls WHERE run_id = %s', :h), '42501', NULL,
                 'runq_observer may not read the table itself (42501)');
RESET ROLE;
SET ROLE runq_client;
SELECT throws_ok(format($$SELECT runq.record_model_call(%s, 1, 3, 'c3', '{}')$$, :h), '42501', NULL,
                 'runq_client may not journal (42501)');
SELECT throws_ok(format('SELECT * FROM runq.model_calls(%s)', :h), '42501', NULL, 'runq_client may not read the journal (42501)');
RESET ROLE;
SELECT is(pg_temp.calls(:h), ARRAY['1@1 applied w1', '2@1 applied a2'], 'only the worker''s and the admin''s requests were stored');

SELECT * FROM finish();
ROLLBACK;
