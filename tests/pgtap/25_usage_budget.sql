-- The cost ledger and budgets (v0.2). runq.record_usage(run_id, epoch,
-- usage) adds each value to the run's totals as exact numerics (0.1 + 0.2 is
-- 0.3, not 0.30000000000000004), over any number of keys, shown by get_run and
-- by a later claim, and appends run.usage (the caller's epoch, the usage as
-- payload); it records even from a fenced epoch and after the run finished
-- (answering false, with exactly one run.fenced per run and epoch), and raises
-- 22023 for an epoch the run never had (0, negative, above its current one, any
-- epoch of a run never claimed) and for usage that is not a non-empty object
-- of non-negative numbers, RQ003 for no run, changing nothing. The budget gate
-- is begin_turn alone: once a total reaches its limit (>=; a key missing from
-- the usage counts 0, so a budget of 0 stops the first turn) the run fails
-- with code budget_exhausted naming the key, the limit and the total, logs
-- run.failed and resolves its started tool calls; heartbeat, checkpoint,
-- begin_tool, ask_user, complete, fail, end_tool and record_usage still apply;
-- a cancel flag comes first, then the deadline, then the budget. The totals
-- span every attempt: a requeue by the sweep or a release and a redrive never
-- reset them. runq.set_budget replaces (NULL removes) the budget of a queued,
-- running, waiting or failed run, answers false for a succeeded or cancelled
-- one changing nothing. submit validates budget and timeout (22023, nothing
-- created), hashes both into the request, and still takes v0.1 calls.
-- runq.usage_report sums the ledger per tenant and kind over [since, until),
-- fenced epochs included. Classes 2500..2599; tenants usage, usage-sub, ur-*.
BEGIN;
SELECT plan(267);

\ir helpers/recovery.sql

-- A run of this file's own class p_class, submitted with a budget (and a
-- timeout) and claimed under epoch 1 with an hour's lease.
CREATE FUNCTION pg_temp.running(p_class int, p_budget jsonb DEFAULT NULL, p_timeout interval DEFAULT NULL,
                                p_tenant text DEFAULT 'usage', p_kind text DEFAULT 'k')
    RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
BEGIN
    SELECT s.run_id INTO v_run
      FROM runq.submit(tenant_id => p_tenant, kind => p_kind, priority => p_class, budget => p_budget,
                       timeout => p_timeout) AS s;
    PERFORM FROM runq.claim(ARRAY[p_class], lease => interval '1 hour') AS c WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;
-- Everything runq keeps about a run, its events included.
CREATE FUNCTION pg_temp.state(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT row_to_json(r)::text FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e WHERE e.run_id = p_run),
        (SELECT json_agg(k ORDER BY k.seq)::text FROM runq.checkpoints AS k WHERE k.run_id = p_run),
        (SELECT json_agg(i ORDER BY i.seq)::text FROM runq.inputs AS i WHERE i.run_id = p_run),
        (SELECT json_agg(t ORDER BY t.call_id)::text FROM runq.tool_calls AS t WHERE t.run_id = p_run))
$$;
-- The same but the usage totals and the run.usage and run.fenced events: what
-- a fenced or late record_usage must leave alone.
CREATE FUNCTION pg_temp.state_but_usage(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT (to_jsonb(r) - 'usage')::text FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e
          WHERE e.run_id = p_run AND e.type NOT IN ('run.usage', 'run.fenced')),
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
-- A run's usage totals as get_run shows them.
CREATE FUNCTION pg_temp.usage(bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT r.usage FROM runq.get_run($1) AS r
$$;
-- The epochs of a run's run.fenced events, in order.
CREATE FUNCTION pg_temp.fenced(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(e.epoch::text, ',' ORDER BY e.event_id), '')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.fenced'
$$;
-- A run's failure but its time and message: the fields a test can know.
-- A budget_exhausted failure names the run whose budget it was: this run's
-- own here, so run_id is left out only when it is this run's.
CREATE FUNCTION pg_temp.failure(bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT r.failure - 'at' - 'message'
           - CASE WHEN r.failure ->> 'run_id' = $1::text THEN 'run_id' ELSE '' END
      FROM runq.get_run($1) AS r
$$;
-- The first column of a query's first row as text, or 'ERROR <SQLSTATE> <message>':
-- an error becomes a failed test, not the end of the file.
CREATE FUNCTION pg_temp.value(p_query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    EXECUTE p_query INTO v;
    RETURN v;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ' ' || SQLERRM;
END $$;
-- Put a run past its deadline: created (and so due) two days earlier.
CREATE PROCEDURE pg_temp.overdue(p_run bigint) LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runq.runs SET created_at = created_at - interval '2 days', deadline = deadline - interval '2 days'
     WHERE run_id = p_run AND deadline IS NOT NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % has no deadline', p_run;
    END IF;
END $$;

-- ---------------------------------------------------------------------------
-- record_usage: exact sums over any keys, shown by get_run and a later claim
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2500, p_budget => '{"cost_usd": 100}') AS r \gset
SELECT updated_at AS updated_r FROM runq.get_run(:r) \gset
SELECT is(pg_temp.usage(:r), '{}'::jsonb, 'a run that recorded nothing has usage {}');
SET ROLE runq_worker;
SELECT is(runq.record_usage(:r, 1, '{"input_tokens": 1200, "output_tokens": 310, "cost_usd": 0.1}'), true,
          'record_usage by the holder (as runq_worker) returns true');
SELECT is(runq.record_usage(:r, 1, '{"cost_usd": 0.2, "cache_tokens": 5}'), true,
          'a second record_usage returns true');
RESET ROLE;
SELECT is(pg_temp.usage(:r), '{"input_tokens": 1200, "output_tokens": 310, "cost_usd": 0.3, "cache_tokens": 5}'::jsonb,
          'the totals add per key, keep the keys of earlier calls, and 0.1 + 0.2 is exactly 0.3');
SELECT is(jsonb_typeof(pg_temp.usage(:r) -> 'cost_usd'), 'number', 'a total is a jsonb number');
SELECT is(runq.record_usage(:r, 1, o.u), true, format('record_usage %s of 10 of cost_usd 0.1', o.n))
  FROM (SELECT g AS n, '{"cost_usd": 0.1}'::jsonb AS u FROM generate_series(1, 10) AS g) AS o ORDER BY o.n;
SELECT is((pg_temp.usage(:r) ->> 'cost_usd')::numeric, 1.3,
          'ten more 0.1s make exactly 1.3 (a float sum would be 1.2999999999999998)');
SELECT is(runq.record_usage(:r, 1, '{"big": 123456789012345678901234567890.123456789, "tiny": 0.000000000000000000001}'),
          true, 'record_usage of a 39-digit and a 1e-21 number');
SELECT is(runq.record_usage(:r, 1, '{"big": 0.000000001, "tiny": 0.000000000000000000002}'), true,
          'and of their small increments');
SELECT is(ARRAY[(pg_temp.usage(:r) ->> 'big')::numeric, (pg_temp.usage(:r) ->> 'tiny')::numeric],
          ARRAY[123456789012345678901234567890.123456790, 0.000000000000000000003],
          'the sums are exact at 39 digits and at 1e-21');
SELECT is(runq.record_usage(:r, 1, '{"retries": 0}'), true, 'a usage of 0 is recorded');
SELECT is(pg_temp.usage(:r) -> 'retries', '0'::jsonb, 'and its key has a total of 0');

-- Many keys at once.
SELECT jsonb_object_agg(format('key_%s', g), g * 0.01) AS many FROM generate_series(1, 200) AS g \gset
SELECT is(runq.record_usage(:r, 1, :'many'), true, 'record_usage of 200 keys at once');
SELECT is(runq.record_usage(:r, 1, :'many'), true, 'and again');
SELECT is((SELECT count(*)::int FROM jsonb_object_keys(pg_temp.usage(:r)) AS k WHERE k LIKE 'key\_%'), 200,
          'the totals hold all 200 keys');
SELECT is((SELECT count(*)::int FROM generate_series(1, 200) AS g
            WHERE (pg_temp.usage(:r) ->> format('key_%s', g))::numeric = g * 0.02), 200,
          'each of the 200 totals is exactly twice its value');

-- The ledger: one run.usage per call, under the caller's epoch, the usage as payload.
SELECT is((SELECT count(*)::int FROM runq.run_events(:r) WHERE type = 'run.usage'), 17,
          'one run.usage per record_usage (17 calls)');
SELECT results_eq(format($$SELECT epoch, payload FROM runq.run_events(%s) WHERE type = 'run.usage'
                            ORDER BY event_id LIMIT 2$$, :r),
                  $$VALUES (1::bigint, '{"input_tokens": 1200, "output_tokens": 310, "cost_usd": 0.1}'::jsonb),
                           (1::bigint, '{"cost_usd": 0.2, "cache_tokens": 5}'::jsonb)$$,
                  'run.usage carries the caller''s epoch and the usage as given');
SELECT is((SELECT count(*)::int FROM runq.run_events(:r) WHERE type = 'run.fenced'), 0,
          'the holder''s record_usage is not fenced');
SELECT is((SELECT updated_at FROM runq.get_run(:r)), :'updated_r'::timestamptz,
          'record_usage does not change updated_at (spend is not a transition)');
SELECT is((SELECT status FROM runq.get_run(:r)), 'running', 'the run is still running');

-- A later claim shows the totals and the budget.
SELECT is(runq.ask_user(:r, 1, '{"q": "go on?"}'), true, '(the run asks the user)');
SELECT is(runq.deliver_input(:r, '{"a": "yes"}'), true, '(the answer requeues it)');
SELECT pg_temp.usage(:r) AS totals_r \gset
CREATE TEMP TABLE claim_r ON COMMIT DROP AS SELECT * FROM runq.claim(ARRAY[2500], lease => interval '1 hour');
SELECT results_eq('SELECT run_id, epoch, usage, budget, deadline FROM claim_r',
                  format($$VALUES (%s::bigint, 2::bigint, %L::jsonb, '{"cost_usd": 100}'::jsonb, NULL::timestamptz)$$,
                         :r, :'totals_r'),
                  'the next claim (epoch 2) shows the totals, the budget and no deadline');
SELECT is((SELECT usage ->> 'cost_usd' FROM claim_r)::numeric, 1.3, 'claim''s cost_usd total is exactly 1.3');
SELECT run_id AS r0 FROM runq.submit(tenant_id => 'usage', kind => 'k', priority => 2501) \gset
SELECT results_eq('SELECT run_id, usage, budget FROM runq.claim(ARRAY[2501], lease => interval ''1 hour'')',
                  format($$VALUES (%s::bigint, '{}'::jsonb, NULL::jsonb)$$, :r0),
                  'a first claim of a run that recorded nothing shows usage {} and no budget');
SELECT is(runq.record_usage(:r, 2, '{"cost_usd": 0.7}'), true, 'epoch 2 records usage');
SELECT is((pg_temp.usage(:r) ->> 'cost_usd')::numeric, 2.0, 'onto the totals of epoch 1: 2.0');
SELECT is(runq.complete(:r, 2), true, '(epoch 2 completes the run)');

-- ---------------------------------------------------------------------------
-- A fenced epoch's usage is recorded; the call answers false, fenced once
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2502) AS f \gset
SELECT is(runq.release(:f, 1), true, '(epoch 1 releases the run)');
SELECT is(runq.record_usage(:f, 1, '{"tokens": 10}'), false,
          'record_usage of a released epoch (the run queued) returns false');
SELECT is(pg_temp.usage(:f), '{"tokens": 10}'::jsonb, 'but the usage is recorded');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[2502], lease => interval '1 hour')), 2::bigint,
          '(claimed again under epoch 2)');
CREATE TEMP TABLE before_f ON COMMIT DROP AS SELECT pg_temp.state_but_usage(:f) AS s;
SELECT is(runq.record_usage(:f, 1, '{"tokens": 5, "cost_usd": 0.25}'), false,
          'record_usage of the stale epoch 1 while epoch 2 holds the run returns false');
SELECT is(runq.record_usage(:f, 1, '{"cost_usd": 0.5}'), false, 'and again false');
SELECT is(pg_temp.usage(:f), '{"tokens": 15, "cost_usd": 0.75}'::jsonb, 'both stale calls'' usage is in the totals');
SELECT is(runq.heartbeat(:f, 1), false, 'a stale heartbeat of epoch 1 is fenced too');
SELECT is(pg_temp.fenced(:f), '1', 'exactly one run.fenced for epoch 1 after four fenced calls');
SELECT is(pg_temp.state_but_usage(:f), (SELECT s FROM before_f),
          'the fenced calls changed nothing but the totals and the ledger (run, epoch, lease, tool calls)');
SELECT results_eq(format($$SELECT epoch, payload FROM runq.run_events(%s) WHERE type = 'run.usage' ORDER BY event_id$$, :f),
                  $$VALUES (1::bigint, '{"tokens": 10}'::jsonb), (1::bigint, '{"tokens": 5, "cost_usd": 0.25}'::jsonb),
                           (1::bigint, '{"cost_usd": 0.5}'::jsonb)$$,
                  'each fenced call''s run.usage carries the caller''s stale epoch 1');
SELECT is(runq.record_usage(:f, 2, '{"tokens": 1}'), true, 'the holder, epoch 2, records: true');
SELECT is(pg_temp.fenced(:f), '1', 'and is not fenced');
SELECT is(runq.complete(:f, 2), true, '(epoch 2 completes the run)');

-- ---------------------------------------------------------------------------
-- Usage after the run finished: recorded, false, one run.fenced
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2503) AS s \gset
SELECT is(runq.complete(:s, 1, '{"answer": 42}'), true, '(the run succeeds)');
CREATE TEMP TABLE before_s ON COMMIT DROP AS SELECT pg_temp.state_but_usage(:s) AS s;
SELECT is(runq.record_usage(:s, 1, '{"cost_usd": 0.05}'), false, 'record_usage after success returns false');
SELECT is(runq.record_usage(:s, 1, '{"cost_usd": 0.05}'), false, 'and again false');
SELECT is(pg_temp.usage(:s), '{"cost_usd": 0.10}'::jsonb, 'the late usage is recorded: 0.05 + 0.05');
SELECT is(pg_temp.state_but_usage(:s), (SELECT s FROM before_s),
          'the succeeded run is otherwise untouched (status, result, finished_at)');
SELECT is(pg_temp.fenced(:s), '1', 'exactly one run.fenced for epoch 1');

SELECT pg_temp.running(2504) AS x \gset
SELECT is(runq.fail(:x, 1, '{"code": "tool_error"}'), true, '(the run fails)');
SELECT is(runq.record_usage(:x, 1, '{"tokens": 3}'), false, 'record_usage after fail returns false');
SELECT results_eq(format($$SELECT status, failure ->> 'code', usage FROM runq.get_run(%s)$$, :x),
                  $$VALUES ('failed'::text, 'tool_error'::text, '{"tokens": 3}'::jsonb)$$,
                  'recorded; the run is still failed with its own failure');

SELECT pg_temp.running(2505) AS c \gset
SELECT is(runq.cancel(:c), 'cancel_requested', '(cancel is requested)');
SELECT is(runq.record_usage(:c, 1, '{"tokens": 2}'), true,
          'record_usage of a cancel-requested run by its holder returns true (not gated)');
SELECT is((SELECT status FROM runq.get_run(:c)), 'running', 'and does not cancel it');
SELECT is(runq.heartbeat(:c, 1), false, '(the next heartbeat cancels the run)');
SELECT is(runq.record_usage(:c, 1, '{"tokens": 4}'), false, 'record_usage after cancel returns false');
SELECT results_eq(format('SELECT status, usage FROM runq.get_run(%s)', :c),
                  $$VALUES ('cancelled'::text, '{"tokens": 6}'::jsonb)$$, 'recorded; the run is still cancelled');

SELECT pg_temp.running(2506) AS w \gset
SELECT is(runq.ask_user(:w, 1, '{"q": "?"}'), true, '(the run waits for the user)');
SELECT is(runq.record_usage(:w, 1, '{"tokens": 9}'), false, 'record_usage of a waiting run returns false');
SELECT results_eq(format('SELECT status, usage FROM runq.get_run(%s)', :w),
                  $$VALUES ('waiting_for_user'::text, '{"tokens": 9}'::jsonb)$$, 'recorded; the run still waits');

-- ---------------------------------------------------------------------------
-- An epoch the run never had raises 22023 and changes nothing
-- ---------------------------------------------------------------------------
-- :f was claimed under epochs 1 and 2 (succeeded under 2); :q never.
SELECT run_id AS q FROM runq.submit(tenant_id => 'usage', kind => 'k', priority => 2507) \gset
CREATE TEMP TABLE before_e ON COMMIT DROP AS
SELECT pg_temp.state(:f) AS f, pg_temp.state(:q) AS q, pg_temp.totals() AS totals;
SELECT throws_ok(format($$SELECT runq.record_usage(%s, 3, '{"tokens": 1}')$$, :f), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 2, got 3', :f),
                 'record_usage under an epoch above the current one: 22023 naming the range');
SELECT throws_ok(format($$SELECT runq.record_usage(%s, 0, '{"tokens": 1}')$$, :f), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 2, got 0', :f),
                 'record_usage under epoch 0 (no claim has it): 22023');
SELECT throws_ok(format($$SELECT runq.record_usage(%s, -1, '{"tokens": 1}')$$, :f), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 2, got -1', :f),
                 'record_usage under a negative epoch: 22023');
SELECT throws_ok(format($$SELECT runq.record_usage(%s, 9223372036854775807, '{"tokens": 1}')$$, :f), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 2, got 9223372036854775807', :f),
                 'record_usage under the largest bigint: 22023');
SELECT throws_ok(format($$SELECT runq.record_usage(%s, -9223372036854775807 - 1, '{"tokens": 1}')$$, :f), '22023',
                 format('epoch must be an epoch run %s was claimed with, 1 to 2, got -9223372036854775808', :f),
                 'record_usage under the least bigint: 22023');
SELECT throws_ok(format($$SELECT runq.record_usage(%s, 1, '{"tokens": 1}')$$, :q), '22023',
                 format('epoch must be an epoch run %s was claimed with (it never was), got 1', :q),
                 'record_usage of a run never claimed, epoch 1: 22023');
SELECT throws_ok(format($$SELECT runq.record_usage(%s, 0, '{"tokens": 1}')$$, :q), '22023',
                 format('epoch must be an epoch run %s was claimed with (it never was), got 0', :q),
                 'record_usage of a run never claimed, epoch 0: 22023');
SELECT throws_ok(format($$SELECT runq.record_usage(%s, NULL, '{"tokens": 1}')$$, :f), '22023', 'epoch must be given, got NULL',
                 'record_usage with a NULL epoch: 22023');
SELECT results_eq('SELECT pg_temp.state(' || :f || '), pg_temp.state(' || :q || '), pg_temp.totals()',
                  'SELECT f, q, totals FROM before_e',
                  'the refused epochs changed nothing: no totals, no run.usage, no run.fenced, nothing anywhere');

-- ---------------------------------------------------------------------------
-- Bad usage raises 22023 naming it; no run raises RQ003; nothing changes
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2508) AS b \gset
SELECT is(runq.record_usage(:b, 1, '{"tokens": 1}'), true, '(the run has recorded once)');
CREATE TEMP TABLE before_b ON COMMIT DROP AS SELECT pg_temp.state(:b) AS s, pg_temp.totals() AS totals;
SELECT throws_ok(format('SELECT runq.record_usage(%s, 1, %L)', :b, v.u), '22023',
                 'usage must be a non-empty object of non-negative numbers, got ' || v.shown,
                 format('record_usage of %s: 22023 naming it', v.what))
  FROM (VALUES (1, NULL::text, 'NULL', 'NULL'),
               (2, '{}', '{}', 'an empty object'),
               (3, '[]', '[]', 'an array'),
               (4, '[{"tokens": 1}]', '[{"tokens": 1}]', 'an array of an object'),
               (5, '5', '5', 'a number'),
               (6, '"tokens"', '"tokens"', 'a string'),
               (7, 'null', 'null', 'a jsonb null'),
               (8, '{"tokens": -1}', '{"tokens": -1}', 'a negative value'),
               (9, '{"tokens": 1, "cost_usd": -0.0001}', '{"tokens": 1, "cost_usd": -0.0001}', 'one negative value among good ones'),
               (10, '{"tokens": "12"}', '{"tokens": "12"}', 'a string value'),
               (11, '{"tokens": null}', '{"tokens": null}', 'a null value'),
               (12, '{"tokens": true}', '{"tokens": true}', 'a boolean value'),
               (13, '{"tokens": {"in": 1}}', '{"tokens": {"in": 1}}', 'a nested object'),
               (14, '{"tokens": [1]}', '{"tokens": [1]}', 'an array of a number as a value'),
               (15, '{"tokens": []}', '{"tokens": []}', 'an empty array as a value')) AS v (n, u, shown, what)
 ORDER BY v.n;
SELECT throws_ok(format($$SELECT runq.record_usage(%s, 1, NULL)$$, :b), '22023',
                 'usage must be a non-empty object of non-negative numbers, got NULL',
                 'record_usage with a NULL usage (untyped): 22023');
SELECT throws_ok($$SELECT runq.record_usage(NULL, 1, '{"tokens": 1}')$$, '22023', 'run_id must be given, got NULL',
                 'record_usage with a NULL run_id: 22023');
SELECT throws_ok($$SELECT runq.record_usage(-2500, 1, '{"tokens": 1}')$$, 'RQ003', 'run -2500 not found',
                 'record_usage of a run that does not exist: RQ003 naming it');
SELECT throws_ok($$SELECT runq.record_usage(-2500, 1, '{"tokens": -1}')$$, '22023',
                 'usage must be a non-empty object of non-negative numbers, got {"tokens": -1}',
                 'bad usage of a run that does not exist: 22023, the usage is checked first');
SELECT results_eq('SELECT pg_temp.state(' || :b || '), pg_temp.totals()', 'SELECT s, totals FROM before_b',
                  'the rejected calls changed nothing: totals, events, nothing anywhere');
SELECT is(pg_temp.usage(:b), '{"tokens": 1}'::jsonb, 'the totals are still the one good call''s');

-- ---------------------------------------------------------------------------
-- The gate: begin_turn at the limit (>=) fails the run, budget_exhausted
-- ---------------------------------------------------------------------------
-- Just under the limit: the turn goes ahead.
SELECT pg_temp.running(2510, p_budget => '{"cost_usd": 1.0}') AS u \gset
SELECT is(runq.record_usage(:u, 1, '{"cost_usd": 0.99}'), true, 'under: 0.99 of a 1.0 budget recorded');
SELECT is(runq.begin_turn(:u, 1), true, 'under: begin_turn at 0.99 of 1.0 returns true');
SELECT is(runq.begin_turn(:u, 1), true, 'under: and the next one too');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s)', :u),
                  $$VALUES ('running'::text, NULL::jsonb)$$, 'under: the run is still running');
SELECT is((SELECT turns::int FROM runq.runs WHERE run_id = :u), 2, 'under: both turns counted');

-- Exactly at the limit: the next turn stops it. 0.99 + 0.01 is exactly 1.00.
SELECT is(runq.begin_tool(:u, 1, 'c-read', 'search', 'read_only')
          AND runq.begin_tool(:u, 1, 'c-idem', 'upsert', 'idempotent')
          AND runq.begin_tool(:u, 1, 'c-pay', 'pay', 'non_idempotent')
          AND runq.begin_tool(:u, 1, 'c-done', 'search', 'read_only')
          AND runq.end_tool(:u, 1, 'c-done', '{"hits": 1}'), true,
          'at: the worker leaves three tool calls started and finishes a fourth');
SELECT is(runq.record_usage(:u, 1, '{"cost_usd": 0.01}'), true, 'at: 0.01 more brings the total to the limit');
SELECT is(runq.begin_turn(:u, 1), false, 'at: begin_turn at exactly the limit returns false');
SELECT results_eq(format('SELECT status, finished_at IS NOT NULL, lease_epoch FROM runq.get_run(%s)', :u),
                  $$VALUES ('failed'::text, true, 1::bigint)$$, 'at: the run failed in that statement');
SELECT is(pg_temp.failure(:u),
          '{"code": "budget_exhausted", "key": "cost_usd", "limit": 1.0, "total": 1.00, "attempt": 1, "epoch": 1}'::jsonb,
          'at: failure budget_exhausted naming the key, the limit and the total (and attempt, epoch)');
SELECT is((SELECT failure ->> 'message' FROM runq.get_run(:u)), 'cost_usd reached 1.00 of its budget of 1.0',
          'at: the message says which key reached what');
SELECT ok(pg_temp.failure_complete(:u), 'at: the failure has code, message, attempt, epoch and at (= finished_at)');
SELECT is((SELECT turns::int FROM runq.runs WHERE run_id = :u), 2, 'at: the refused turn is not counted');
SELECT is((pg_temp.events(:u))[1:11],
          ARRAY['run.created@0', 'run.claimed@1', 'run.usage@1', 'run.turn_started@1', 'run.turn_started@1',
                'run.tool_started@1', 'run.tool_started@1', 'run.tool_started@1', 'run.tool_started@1',
                'run.tool_finished@1', 'run.usage@1'],
          'at: the refused turn appended no run.turn_started');
SELECT is(ARRAY(SELECT x FROM unnest((pg_temp.events(:u))[12:]) AS x ORDER BY x),
          ARRAY['run.failed@1', 'run.tool_uncertain@1'],
          'at: it appended run.failed and a run.tool_uncertain for the non_idempotent call, no run.fenced');
SELECT is((SELECT payload FROM runq.run_events(:u) WHERE type = 'run.failed'), (SELECT failure FROM runq.get_run(:u)),
          'at: run.failed carries the failure');
SELECT results_eq(format('SELECT call_id, status FROM runq.tool_calls(%s) ORDER BY call_id', :u),
                  $$VALUES ('c-done'::text, 'finished'::text), ('c-idem', 'retryable'), ('c-pay', 'uncertain'),
                           ('c-read', 'retryable')$$,
                  'at: started calls resolved as on requeue: retryable, uncertain; the finished one stays');
SELECT is(runq.begin_turn(:u, 1), false, 'at: a begin_turn after that is fenced: false');
SELECT is(pg_temp.fenced(:u), '1', 'at: with its one run.fenced');

-- Over the limit stops it too; a key of the usage the budget does not name does not.
SELECT pg_temp.running(2511, p_budget => '{"tokens": 100}') AS o \gset
SELECT is(runq.record_usage(:o, 1, '{"cost_usd": 1000000, "other_tokens": 5000}'), true,
          'other keys: usage of keys the budget does not name');
SELECT is(runq.begin_turn(:o, 1), true, 'other keys: do not stop the turn (tokens, missing, counts 0)');
SELECT is(runq.record_usage(:o, 1, '{"tokens": 99}'), true, 'over: 99 of 100 tokens');
SELECT is(runq.begin_turn(:o, 1), true, 'over: 99 of 100 does not stop the turn');
SELECT is(runq.record_usage(:o, 1, '{"tokens": 51}'), true, 'over: 51 more make 150 of 100');
SELECT is(runq.begin_turn(:o, 1), false, 'over: 150 of 100 stops the turn');
SELECT is(pg_temp.failure(:o),
          '{"code": "budget_exhausted", "key": "tokens", "limit": 100, "total": 150, "attempt": 1, "epoch": 1}'::jsonb,
          'over: budget_exhausted, tokens, limit 100, total 150');

-- A budget of 0 stops the first turn; a key missing from the usage counts 0.
SELECT pg_temp.running(2512, p_budget => '{"cost_usd": 0}') AS z \gset
SELECT is(runq.begin_turn(:z, 1), false, 'zero: a budget of 0 stops the first turn, before any usage');
SELECT is(pg_temp.failure(:z),
          '{"code": "budget_exhausted", "key": "cost_usd", "limit": 0, "total": 0, "attempt": 1, "epoch": 1}'::jsonb,
          'zero: budget_exhausted with total 0 (the missing key counts 0)');
SELECT is((SELECT count(*)::int FROM runq.run_events(:z) WHERE type = 'run.turn_started'), 0, 'zero: no turn started');
SELECT results_eq(format('SELECT usage, budget, failure ->> ''code'' FROM runq.dead_letter() WHERE run_id = %s', :o),
                  $$VALUES ('{"cost_usd": 1000000, "other_tokens": 5000, "tokens": 150}'::jsonb, '{"tokens": 100}'::jsonb,
                           'budget_exhausted'::text)$$,
                  'dead_letter shows the exhausted run with its usage and budget');

-- Several keys: the one that reached its limit is named.
SELECT pg_temp.running(2513, p_budget => '{"cost_usd": 5, "tokens": 10}') AS k2 \gset
SELECT is(runq.record_usage(:k2, 1, '{"cost_usd": 4.5}'), true, 'two keys: cost_usd 4.5 of 5');
SELECT is(runq.begin_turn(:k2, 1), true, 'two keys: neither reached (tokens missing counts 0 of 10)');
SELECT is(runq.record_usage(:k2, 1, '{"tokens": 10}'), true, 'two keys: tokens 10 of 10');
SELECT is(runq.begin_turn(:k2, 1), false, 'two keys: tokens reached: the turn stops');
SELECT is(pg_temp.failure(:k2) - 'attempt' - 'epoch',
          '{"code": "budget_exhausted", "key": "tokens", "limit": 10, "total": 10}'::jsonb,
          'two keys: the failure names tokens, the key that reached its limit');

-- ---------------------------------------------------------------------------
-- Only begin_turn is gated
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2520, p_budget => '{"tokens": 10}') AS g \gset
SELECT is(runq.record_usage(:g, 1, '{"tokens": 10}'), true, 'gate: the budget is reached');
SELECT is(runq.heartbeat(:g, 1), true, 'gate: heartbeat at the limit still returns true');
SELECT is(runq.checkpoint(:g, 1, '{"step": 1}'), true, 'gate: checkpoint still applies');
SELECT is(runq.begin_tool(:g, 1, 'g1', 'search', 'read_only'), true, 'gate: begin_tool still applies');
SELECT is(runq.end_tool(:g, 1, 'g1', '{"hits": 0}'), true, 'gate: end_tool still applies');
SELECT is(runq.record_usage(:g, 1, '{"tokens": 5}'), true, 'gate: record_usage still applies, beyond the limit');
SELECT is(runq.ask_user(:g, 1, '{"q": "more budget?"}'), true, 'gate: ask_user still applies');
SELECT results_eq(format('SELECT status, usage, failure FROM runq.get_run(%s)', :g),
                  $$VALUES ('waiting_for_user'::text, '{"tokens": 15}'::jsonb, NULL::jsonb)$$,
                  'gate: the run waits, with 15 of 10 tokens and no failure');
SELECT results_eq(format('SELECT count(*)::int FROM runq.checkpoints WHERE run_id = %s
                          UNION ALL SELECT count(*)::int FROM runq.tool_calls(%s) WHERE status = ''finished''', :g, :g),
                  'VALUES (1), (1)', 'gate: the checkpoint and the tool call were stored');
SELECT is(runq.deliver_input(:g, '{"a": "no"}'), true, 'gate: the answer requeues it');
SELECT results_eq('SELECT epoch, attempt, usage, budget FROM runq.claim(ARRAY[2520], lease => interval ''1 hour'')',
                  $$VALUES (2::bigint, 1, '{"tokens": 15}'::jsonb, '{"tokens": 10}'::jsonb)$$,
                  'gate: the next claim shows the totals and the budget');
SELECT is(runq.begin_turn(:g, 2), false, 'gate: and its first begin_turn stops it');
SELECT is(pg_temp.failure(:g),
          '{"code": "budget_exhausted", "key": "tokens", "limit": 10, "total": 15, "attempt": 1, "epoch": 2}'::jsonb,
          'gate: budget_exhausted under epoch 2, attempt 1');

SELECT pg_temp.running(2521, p_budget => '{"tokens": 10}') AS g2 \gset
SELECT is(runq.record_usage(:g2, 1, '{"tokens": 11}'), true, 'complete: the budget is passed');
SELECT is(runq.complete(:g2, 1, '{"answer": "done"}'), true, 'complete: at the limit still applies');
SELECT results_eq(format('SELECT status, result FROM runq.get_run(%s)', :g2),
                  $$VALUES ('succeeded'::text, '{"answer": "done"}'::jsonb)$$, 'complete: the run succeeded');

SELECT pg_temp.running(2522, p_budget => '{"tokens": 10}') AS g3 \gset
SELECT is(runq.record_usage(:g3, 1, '{"tokens": 10}'), true, 'fail: the budget is reached');
SELECT is(runq.fail(:g3, 1, '{"code": "model_refused"}'), true, 'fail: at the limit still applies');
SELECT is((SELECT failure ->> 'code' FROM runq.get_run(:g3)), 'model_refused',
          'fail: the worker''s failure stands, not budget_exhausted');

-- ---------------------------------------------------------------------------
-- Precedence at begin_turn: cancel flag, then deadline, then budget
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2530, p_budget => '{"tokens": 1}') AS p1 \gset
SELECT is(runq.record_usage(:p1, 1, '{"tokens": 1}') AND runq.cancel(:p1) = 'cancel_requested', true,
          'cancel > budget: budget reached and cancel requested');
SELECT is(runq.begin_turn(:p1, 1), false, 'cancel > budget: begin_turn returns false');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s)', :p1),
                  $$VALUES ('cancelled'::text, NULL::jsonb)$$, 'cancel > budget: cancelled, not failed');
SELECT is((pg_temp.events(:p1))[cardinality(pg_temp.events(:p1))], 'run.cancelled@1',
          'cancel > budget: run.cancelled, no run.failed');

SELECT pg_temp.running(2531, p_budget => '{"tokens": 1}', p_timeout => interval '1 hour') AS p2 \gset
SELECT is(runq.record_usage(:p2, 1, '{"tokens": 1}'), true, 'deadline > budget: budget reached');
CALL pg_temp.overdue(:p2);
SELECT is(runq.begin_turn(:p2, 1), false, 'deadline > budget: begin_turn past the deadline returns false');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :p2),
                  $$VALUES ('failed'::text, 'deadline_exceeded'::text)$$,
                  'deadline > budget: failed deadline_exceeded, not budget_exhausted');

SELECT pg_temp.running(2532, p_budget => '{"tokens": 1}', p_timeout => interval '1 hour') AS p3 \gset
SELECT is(runq.record_usage(:p3, 1, '{"tokens": 1}') AND runq.cancel(:p3) = 'cancel_requested', true,
          'cancel > deadline > budget: budget reached, cancel requested');
CALL pg_temp.overdue(:p3);
SELECT is(runq.begin_turn(:p3, 1), false, 'cancel > deadline > budget: begin_turn returns false');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s)', :p3),
                  $$VALUES ('cancelled'::text, NULL::jsonb)$$, 'cancel > deadline > budget: cancelled');

-- ---------------------------------------------------------------------------
-- The budget spans every attempt: sweep, release and redrive keep the totals
-- ---------------------------------------------------------------------------
SELECT run_id AS a FROM runq.submit(tenant_id => 'usage', kind => 'k', priority => 2540,
                                    budget => '{"tokens": 100}') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[2540], lease => interval '1 millisecond') \gset
SELECT is(runq.record_usage(:a, :e, '{"tokens": 60}'), true, 'attempts: attempt 1 records 60 of 100 tokens');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:a || ':requeued'], 'attempts: attempt 1''s lease expires and the sweep requeues it');
SELECT is(pg_temp.usage(:a), '{"tokens": 60}'::jsonb, 'attempts: the requeue kept the totals');
UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :a;  -- fixture: skip the backoff
SELECT results_eq('SELECT epoch, attempt, usage FROM runq.claim(ARRAY[2540], lease => interval ''1 hour'')',
                  $$VALUES (2::bigint, 2, '{"tokens": 60}'::jsonb)$$,
                  'attempts: attempt 2 is claimed with the 60 tokens of attempt 1');
SELECT is(runq.record_usage(:a, 2, '{"tokens": 30}'), true, 'attempts: attempt 2 records 30');
SELECT is(runq.release(:a, 2), true, 'attempts: attempt 2 releases the run');
SELECT results_eq('SELECT epoch, usage FROM runq.claim(ARRAY[2540], lease => interval ''1 hour'')',
                  $$VALUES (3::bigint, '{"tokens": 90}'::jsonb)$$,
                  'attempts: the release kept the totals: claimed under epoch 3 with 90 tokens');
SELECT is(runq.begin_turn(:a, 3), true, 'attempts: 90 of 100: the turn goes ahead');
SELECT is(runq.record_usage(:a, 3, '{"tokens": 10}'), true, 'attempts: 10 more');
SELECT is(runq.begin_turn(:a, 3), false, 'attempts: 100 of 100 over three attempts stops the turn');
SELECT is(pg_temp.failure(:a),
          '{"code": "budget_exhausted", "key": "tokens", "limit": 100, "total": 100, "attempt": 2, "epoch": 3}'::jsonb,
          'attempts: budget_exhausted, total 100, epoch 3 (attempt 2: the release gave its attempt back)');
SELECT is(runq.redrive(:a, 'try again'), true, 'redrive: the exhausted run is redriven');
SELECT results_eq(format('SELECT status, usage, budget FROM runq.get_run(%s)', :a),
                  $$VALUES ('queued'::text, '{"tokens": 100}'::jsonb, '{"tokens": 100}'::jsonb)$$,
                  'redrive: queued, the totals and the budget kept');
SELECT results_eq('SELECT epoch, usage FROM runq.claim(ARRAY[2540], lease => interval ''1 hour'')',
                  $$VALUES (4::bigint, '{"tokens": 100}'::jsonb)$$, 'redrive: claimed under epoch 4 with the totals');
SELECT is(runq.begin_turn(:a, 4), false, 'redrive: the budget is still exhausted: the first turn stops');
SELECT is(runq.set_budget(:a, '{"tokens": 150}'), true, 'redrive: set_budget of the failed run raises the limit');
SELECT is(runq.redrive(:a), true, 'redrive: redriven again');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[2540], lease => interval '1 hour')), 5::bigint, 'redrive: claimed under epoch 5');
SELECT is(runq.begin_turn(:a, 5), true, 'redrive: 100 of 150: the turn goes ahead');
SELECT is(pg_temp.usage(:a), '{"tokens": 100}'::jsonb, 'redrive: the totals are still the 100 of every attempt');
SELECT is(runq.complete(:a, 5), true, '(epoch 5 completes the run)');

-- ---------------------------------------------------------------------------
-- set_budget
-- ---------------------------------------------------------------------------
SELECT run_id AS sq FROM runq.submit(tenant_id => 'usage', kind => 'k', priority => 2550,
                                     budget => '{"cost_usd": 2.00}') \gset
SELECT is((SELECT budget FROM runq.get_run(:sq)), '{"cost_usd": 2.00}'::jsonb, 'get_run shows the submitted budget');
SELECT is((SELECT count(*)::int FROM runq.run_events(:sq)), 1, '(the queued run has only run.created)');
SET ROLE runq_admin;
SELECT is(runq.set_budget(:sq, '{"tokens": 5, "cost_usd": 1}'), true, 'set_budget of a queued run (as runq_admin): true');
RESET ROLE;
SELECT is((SELECT budget FROM runq.get_run(:sq)), '{"tokens": 5, "cost_usd": 1}'::jsonb, 'the budget is the new one');
SELECT is(runq.set_budget(:sq, '{"tokens": 7}'), true, 'set_budget again: true');
SELECT is((SELECT budget FROM runq.get_run(:sq)), '{"tokens": 7}'::jsonb, 'it replaces the budget, it does not merge');
SELECT is(runq.set_budget(:sq, NULL), true, 'set_budget NULL: true');
SELECT is((SELECT budget FROM runq.get_run(:sq)), NULL::jsonb, 'NULL removes the budget');
SELECT is((SELECT count(*)::int FROM runq.run_events(:sq)), 1, 'set_budget appends no event');
SELECT results_eq('SELECT budget FROM runq.claim(ARRAY[2550], lease => interval ''1 hour'')', 'VALUES (NULL::jsonb)',
                  'a claim shows no budget');
SELECT is(runq.record_usage(:sq, 1, '{"tokens": 1000}') AND runq.begin_turn(:sq, 1), true,
          'without a budget nothing stops the turn');
SELECT is(runq.set_budget(:sq, '{"tokens": 1000}'), true, 'set_budget of a running run: true');
SELECT is(runq.begin_turn(:sq, 1), false, 'the holder''s next begin_turn meets the new budget at once');
SELECT is(pg_temp.failure(:sq) ->> 'code', 'budget_exhausted', 'budget_exhausted');
SELECT is(runq.set_budget(:sq, '{"tokens": 2000}'), true, 'set_budget of a failed run: true');
SELECT is((SELECT budget FROM runq.get_run(:sq)), '{"tokens": 2000}'::jsonb, 'the failed run has the new budget');
SELECT is(pg_temp.usage(:sq), '{"tokens": 1000}'::jsonb, 'set_budget leaves the totals alone');

SELECT pg_temp.running(2551) AS sw \gset
SELECT is(runq.ask_user(:sw, 1, '{"q": "?"}'), true, '(a run waits for the user)');
SELECT is(runq.set_budget(:sw, '{"tokens": 3}'), true, 'set_budget of a waiting run: true');
SELECT is((SELECT budget FROM runq.get_run(:sw)), '{"tokens": 3}'::jsonb, 'the waiting run has the budget');

-- Succeeded and cancelled: false, nothing changes. :s succeeded, :c cancelled.
CREATE TEMP TABLE before_sb ON COMMIT DROP AS SELECT pg_temp.state(:s) AS s, pg_temp.state(:c) AS c;
SELECT is(runq.set_budget(:s, '{"tokens": 1}'), false, 'set_budget of a succeeded run: false');
SELECT is(runq.set_budget(:s, NULL), false, 'set_budget NULL of a succeeded run: false');
SELECT is(runq.set_budget(:c, '{"tokens": 1}'), false, 'set_budget of a cancelled run: false');
SELECT results_eq(format('SELECT pg_temp.state(%s), pg_temp.state(%s)', :s, :c), 'SELECT s, c FROM before_sb',
                  'the succeeded and the cancelled runs are unchanged');

-- Bad budgets and runs.
CREATE TEMP TABLE before_bb ON COMMIT DROP AS SELECT pg_temp.state(:sw) AS s;
SELECT throws_ok(format('SELECT runq.set_budget(%s, %L)', :sw, v.b), '22023',
                 'budget must be NULL or a non-empty object of non-negative numbers, got ' || v.b,
                 format('set_budget with %s: 22023 naming it', v.what))
  FROM (VALUES (1, '{}', 'an empty object'), (2, '[]', 'an array'), (3, '{"tokens": -1}', 'a negative limit'),
               (4, '{"tokens": "5"}', 'a string limit'), (5, 'null', 'a jsonb null'),
               (6, '3', 'a number'), (7, '{"tokens": [3]}', 'an array as a limit')) AS v (n, b, what)
 ORDER BY v.n;
SELECT throws_ok($$SELECT runq.set_budget(-2550, '{"tokens": 1}')$$, 'RQ003', 'run -2550 not found',
                 'set_budget of a run that does not exist: RQ003');
SELECT throws_ok($$SELECT runq.set_budget(NULL, '{"tokens": 1}')$$, '22023', 'run_id must be given, got NULL',
                 'set_budget with a NULL run_id: 22023');
SELECT is(pg_temp.state(:sw), (SELECT s FROM before_bb), 'the rejected set_budget calls changed nothing');

-- ---------------------------------------------------------------------------
-- submit: budget and timeout validated, hashed; v0.1 calls still work
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE before_sub ON COMMIT DROP AS SELECT pg_temp.totals() AS totals;
SELECT throws_ok(format($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2560,
                                                    idempotency_key => 'sub-bad', budget => %L)$$, v.b),
                 '22023', 'budget must be NULL or a non-empty object of non-negative numbers, got ' || v.b,
                 format('submit with a budget of %s: 22023 naming it', v.what))
  FROM (VALUES (1, '{}', 'an empty object'), (2, '[]', 'an array'), (3, '{"cost_usd": -0.01}', 'a negative limit'),
               (4, '{"cost_usd": "2"}', 'a string limit'), (5, 'null', 'a jsonb null'),
               (6, '{"tokens": null, "cost_usd": 2}', 'a null limit'), (7, '2', 'a number'),
               (8, '{"cost_usd": [2]}', 'an array as a limit')) AS v (n, b, what)
 ORDER BY v.n;
SELECT throws_ok(format($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2560,
                                                    idempotency_key => 'sub-bad', timeout => %L)$$, v.t),
                 '22023', 'timeout must be positive and under 1000 years, got ' || v.shown,
                 format('submit with a timeout of %s: 22023 naming it', v.what))
  FROM (VALUES (1, '0', '00:00:00', 'zero'), (2, '-1 second', '-00:00:01', 'minus a second'),
               (3, '1000 years', '1000 years', '1000 years')) AS v (n, t, shown, what)
 ORDER BY v.n;
SELECT is(pg_temp.totals(), (SELECT totals FROM before_sub), 'the rejected submits created nothing, not even a key');
SELECT is(pg_temp.value($$SELECT outcome FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2560,
                                                          idempotency_key => 'sub-bad')$$), 'created',
          'the key of the rejected submits is still free');

-- The request hash covers budget and timeout.
SELECT run_id AS h FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2561, idempotency_key => 'sub-b',
                                    budget => '{"cost_usd": 2, "tokens": 10}', timeout => interval '1 hour') \gset
SELECT results_eq($$SELECT outcome FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2561,
                      idempotency_key => 'sub-b', budget => '{"tokens": 10, "cost_usd": 2}', timeout => interval '60 minutes')$$,
                  $$VALUES ('duplicate'::text)$$,
                  'same key, same budget (keys reordered) and timeout: duplicate');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2561,
                   idempotency_key => 'sub-b', budget => '{"cost_usd": 3, "tokens": 10}', timeout => interval '1 hour')$$,
                 'RQ001', NULL, 'same key, another budget: RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2561,
                   idempotency_key => 'sub-b', timeout => interval '1 hour')$$,
                 'RQ001', NULL, 'same key without the budget: RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2561,
                   idempotency_key => 'sub-b', budget => '{"cost_usd": 2, "tokens": 10}', timeout => interval '2 hours')$$,
                 'RQ001', NULL, 'same key, another timeout: RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2561,
                   idempotency_key => 'sub-b', budget => '{"cost_usd": 2, "tokens": 10}')$$,
                 'RQ001', NULL, 'same key without the timeout: RQ001');
SELECT run_id AS h0 FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2562,
                                     idempotency_key => 'sub-none') \gset
SELECT results_eq($$SELECT outcome FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2562,
                      idempotency_key => 'sub-none', budget => NULL, timeout => NULL)$$,
                  $$VALUES ('duplicate'::text)$$, 'a key stored without budget and timeout: explicit NULLs are a duplicate');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2562,
                   idempotency_key => 'sub-none', budget => '{"cost_usd": 1}')$$,
                 'RQ001', NULL, 'and a budget added to it is RQ001');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', priority => 2562,
                   idempotency_key => 'sub-none', timeout => interval '1 hour')$$,
                 'RQ001', NULL, 'and a timeout added to it is RQ001');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE priority IN (2561, 2562)), 2,
          'the duplicates and conflicts created no run (two runs in all)');

-- A submit that delivers input to the session's waiting run leaves that run's
-- budget and deadline as they were.
SELECT run_id AS wi FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', session_id => 'sub-s', priority => 2564,
                                     budget => '{"tokens": 5}') \gset
SELECT is((SELECT epoch FROM runq.claim(ARRAY[2564], lease => interval '1 hour')) = 1
          AND runq.ask_user(:wi, 1, '{"q": "?"}'), true, '(the session''s run waits for the user)');
SELECT results_eq($$SELECT outcome FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', session_id => 'sub-s',
                      priority => 2564, payload => '{"a": 1}', budget => '{"tokens": 500}', timeout => interval '1 hour')$$,
                  format($$VALUES ('input_delivered'::text)$$),
                  'a submit with a budget and a timeout to the waiting session delivers input');
SELECT results_eq(format('SELECT status, budget, deadline FROM runq.get_run(%s)', :wi),
                  $$VALUES ('queued'::text, '{"tokens": 5}'::jsonb, NULL::timestamptz)$$,
                  'the waiting run keeps its own budget and gets no deadline');

-- v0.1 calls: positional with its eleven arguments, and named.
SELECT run_id AS v1 FROM runq.submit('usage-sub', 'k', '{"v": 1}', NULL, 2563, NULL, NULL, NULL, 2, 'fail', NULL) \gset
SELECT results_eq(format('SELECT kind, priority, max_attempts, usage, budget, deadline FROM runq.get_run(%s)', :v1),
                  $$VALUES ('k'::text, 2563, 2, '{}'::jsonb, NULL::jsonb, NULL::timestamptz)$$,
                  'a v0.1 positional submit of eleven arguments works: usage {}, no budget, no deadline');
SELECT run_id AS v2 FROM runq.submit(tenant_id => 'usage-sub', kind => 'k', payload => '{"v": 2}', priority => 2563,
                                     max_attempts => 4, recovery_policy => 'zero_work',
                                     queue_ttl => interval '1 day') \gset
SELECT results_eq(format('SELECT max_attempts, usage, budget, deadline FROM runq.get_run(%s)', :v2),
                  $$VALUES (4, '{}'::jsonb, NULL::jsonb, NULL::timestamptz)$$,
                  'a v0.1 named submit works the same');
SELECT run_id AS v3 FROM runq.submit('usage-sub', 'k', '{}', NULL, 2563, NULL, NULL, NULL, 3, 'resume', NULL,
                                     '{"tokens": 5}', '30 minutes') \gset
SELECT results_eq(format('SELECT budget, deadline - created_at FROM runq.get_run(%s)', :v3),
                  $$VALUES ('{"tokens": 5}'::jsonb, interval '30 minutes')$$,
                  'budget and timeout are the 12th and 13th positional arguments');

-- ---------------------------------------------------------------------------
-- usage_report: the ledger per tenant and kind over [since, until)
-- ---------------------------------------------------------------------------
-- record_usage, its run.usage event then dated p_at (fixture: a ledger with history).
CREATE FUNCTION pg_temp.spend(p_run bigint, p_epoch bigint, p_usage jsonb, p_at timestamptz)
    RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_answer boolean := runq.record_usage(p_run, p_epoch, p_usage);
BEGIN
    UPDATE runq.run_events AS e SET created_at = p_at
     WHERE e.run_id = p_run
       AND e.event_id = (SELECT max(x.event_id) FROM runq.run_events AS x
                          WHERE x.run_id = p_run AND x.type = 'run.usage');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % has no run.usage event', p_run;
    END IF;
    RETURN v_answer;
END $$;
-- The report's rows of this file's tenants, in the report's order.
CREATE FUNCTION pg_temp.report(p_since timestamptz, p_until timestamptz DEFAULT NULL)
    RETURNS TABLE(tenant_id text, kind text, runs bigint, usage jsonb) LANGUAGE sql AS $$
    SELECT u.tenant_id, u.kind, u.runs, u.usage FROM runq.usage_report(p_since, p_until) WITH ORDINALITY AS u
     WHERE u.tenant_id LIKE 'ur-%' ORDER BY u.ordinality
$$;

SELECT pg_temp.running(2570, p_tenant => 'ur-a', p_kind => 'ur-x') AS u1 \gset
SELECT pg_temp.running(2571, p_tenant => 'ur-a', p_kind => 'ur-x') AS u2 \gset
SELECT pg_temp.running(2572, p_tenant => 'ur-a', p_kind => 'ur-y') AS u3 \gset
SELECT pg_temp.running(2573, p_tenant => 'ur-b', p_kind => 'ur-x') AS u4 \gset
SELECT is(pg_temp.spend(:u1, 1, '{"tokens": 10, "cost_usd": 0.1}', '2001-02-03 00:00:00+00'), true,
          'report: u1 spends at 00:00');
SELECT is(runq.release(:u1, 1), true, '(u1 is released)');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[2570], lease => interval '1 hour')), 2::bigint, '(u1 is claimed under epoch 2)');
SELECT is(pg_temp.spend(:u1, 1, '{"tokens": 5, "cost_usd": 0.2}', '2001-02-03 01:00:00+00'), false,
          'report: u1''s fenced epoch 1 spends at 01:00');
SELECT is(pg_temp.spend(:u2, 1, '{"tokens": 1}', '2001-02-03 02:00:00+00'), true, 'report: u2 spends at 02:00');
SELECT is(runq.complete(:u3, 1), true, '(u3 succeeds)');
SELECT is(pg_temp.spend(:u3, 1, '{"cost_usd": 0.05}', '2001-02-03 01:00:00+00'), false,
          'report: u3 spends at 01:00, after it finished');
SELECT is(pg_temp.spend(:u4, 1, '{"tokens": 7}', '2001-02-03 03:00:00+00'), true, 'report: u4 (tenant ur-b) spends at 03:00');

SELECT results_eq($$SELECT * FROM pg_temp.report('2001-02-03 00:00:00+00', '2001-02-03 03:00:00+00')$$,
                  $$VALUES ('ur-a'::text, 'ur-x'::text, 2::bigint, '{"tokens": 16, "cost_usd": 0.3}'::jsonb),
                           ('ur-a', 'ur-y', 1, '{"cost_usd": 0.05}')$$,
                  'report [00:00, 03:00): per tenant and kind in that order, distinct runs, exact sums, '
                  'the fenced and the late usage included, 03:00 left out');
SELECT results_eq($$SELECT * FROM pg_temp.report('2001-02-03 01:00:00+00')$$,
                  $$VALUES ('ur-a'::text, 'ur-x'::text, 2::bigint, '{"tokens": 6, "cost_usd": 0.2}'::jsonb),
                           ('ur-a', 'ur-y', 1, '{"cost_usd": 0.05}'), ('ur-b', 'ur-x', 1, '{"tokens": 7}')$$,
                  'report from 01:00 with no until: since is inclusive, no upper end');
SELECT results_eq($$SELECT * FROM pg_temp.report('2001-02-03 01:00:00+00', '2001-02-03 01:00:00.000001+00')$$,
                  $$VALUES ('ur-a'::text, 'ur-x'::text, 1::bigint, '{"tokens": 5, "cost_usd": 0.2}'::jsonb),
                           ('ur-a', 'ur-y', 1, '{"cost_usd": 0.05}')$$,
                  'report [01:00, 01:00 + 1 µs): only what was recorded at 01:00');
SELECT is_empty($$SELECT * FROM pg_temp.report('2001-02-03 03:00:00.000001+00', '2001-02-04 00:00:00+00')$$,
                'report of a range with no usage: no rows');
SELECT results_eq($$SELECT usage ->> 'cost_usd' FROM pg_temp.report('2001-02-03 00:00:00+00', '2001-02-03 02:00:00+00')
                     WHERE kind = 'ur-x'$$,
                  $$VALUES ('0.3'::text)$$, 'report: 0.1 + 0.2 sums to exactly 0.3');
SET ROLE runq_admin;
SELECT is((SELECT count(*)::int FROM runq.usage_report('2001-02-03 00:00:00+00', '2001-02-04 00:00:00+00')
            WHERE tenant_id LIKE 'ur-%'), 3, 'runq_admin reads the report');
RESET ROLE;

SELECT throws_ok('SELECT * FROM runq.usage_report(NULL)', '22023', 'since must be a finite time, got NULL',
                 'usage_report with a NULL since: 22023');
SELECT throws_ok($$SELECT * FROM runq.usage_report(NULL, '2001-02-04 00:00:00+00')$$, '22023',
                 'since must be a finite time, got NULL', 'usage_report with a NULL since and an until: 22023');
SELECT throws_ok($$SELECT * FROM runq.usage_report('-infinity')$$, '22023', 'since must be a finite time, got -infinity',
                 'usage_report since -infinity: 22023');
SELECT throws_ok($$SELECT * FROM runq.usage_report('2001-02-03 00:00:00+00', '2001-02-03 00:00:00+00')$$, '22023',
                 format('until must be NULL or after since (%1$s), got %1$s', '2001-02-03 00:00:00+00'::timestamptz),
                 'usage_report with until = since: 22023');
SELECT throws_ok($$SELECT * FROM runq.usage_report('2001-02-03 00:00:00+00', '2001-02-02 00:00:00+00')$$, '22023',
                 format('until must be NULL or after since (%s), got %s', '2001-02-03 00:00:00+00'::timestamptz,
                        '2001-02-02 00:00:00+00'::timestamptz),
                 'usage_report with until before since: 22023');

SELECT * FROM finish();
ROLLBACK;
