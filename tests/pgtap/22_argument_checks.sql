-- The shared argument checks (deploy/argument_checks.sql and
-- deploy/argument_check_usage.sql): each check is true for a good value and
-- raises 22023 "<argument> must be <rule>, got <value>" at its edges; each is
-- inlined by the planner into the calling expression, a
-- CASE and no call; a second bad call in one transaction, after a first was
-- caught (when PL/pgSQL has left its cached simple-expression path for a
-- freshly planned query, whose custom plan folds the arguments into
-- constants), still raises, and good calls after it still work;
-- runq._run_not_found answers a NULL run_id with 22023 and a missing one with
-- RQ003 through every function that looks a run up; and no runq role may call
-- the checks. Classes 2100..2199.
BEGIN;
SELECT plan(145);

-- The EXPLAIN (VERBOSE) text of a query, as one string.
CREATE FUNCTION pg_temp.plan(p_query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_line text;
    v_plan text := '';
BEGIN
    -- test-only dynamic SQL: EXPLAIN of a query given as text
    FOR v_line IN EXECUTE 'EXPLAIN (VERBOSE) ' || p_query LOOP
        v_plan := v_plan || v_line || E'\n';
    END LOOP;
    RETURN v_plan;
END $$;

-- ---------------------------------------------------------------------------
-- _bad_argument: the one message
-- ---------------------------------------------------------------------------
SELECT throws_ok($$SELECT runq._bad_argument('a', 'b', 'c'::text)$$, '22023', 'a must be b, got c',
                 '_bad_argument raises 22023 "<argument> must be <expected>, got <got>"');

-- ---------------------------------------------------------------------------
-- _check_identifier: 1 to 256 characters; NULL only when optional
-- ---------------------------------------------------------------------------
SELECT is(runq._check_identifier('x', 'a'), true, 'identifier: one character is good');
SELECT is(runq._check_identifier('x', repeat('x', 256)), true, 'identifier: 256 characters are good');
SELECT is(runq._check_identifier('x', repeat('é', 256)), true, 'identifier: 256 two-byte characters are good (characters, not bytes)');
SELECT is(runq._check_identifier('x', NULL, optional => true), true, 'identifier: NULL is good when optional');
SELECT is(runq._check_identifier('x', repeat('x', 256), optional => true), true,
          'identifier: 256 characters are good when optional');
SELECT throws_ok($$SELECT runq._check_identifier('tenant_id', repeat('x', 257))$$, '22023',
                 format('tenant_id must be 1 to 256 characters, got %s', quote_literal(repeat('x', 100))),
                 'identifier: 257 characters raise, naming the first 100');
SELECT throws_ok($$SELECT runq._check_identifier('tenant_id', '')$$, '22023',
                 $m$tenant_id must be 1 to 256 characters, got ''$m$, 'identifier: empty raises');
SELECT throws_ok($$SELECT runq._check_identifier('tenant_id', NULL)$$, '22023',
                 'tenant_id must be 1 to 256 characters, got NULL', 'identifier: NULL raises when not optional');
SELECT throws_ok($$SELECT runq._check_identifier('session_id', '', optional => true)$$, '22023',
                 $m$session_id must be NULL or 1 to 256 characters, got ''$m$, 'identifier: empty raises when optional');
SELECT throws_ok($$SELECT runq._check_identifier('session_id', repeat('y', 257), optional => true)$$, '22023',
                 format('session_id must be NULL or 1 to 256 characters, got %s', quote_literal(repeat('y', 100))),
                 'identifier: 257 characters raise when optional');

-- ---------------------------------------------------------------------------
-- _check_count: at least 1
-- ---------------------------------------------------------------------------
SELECT is(runq._check_count('x', 1), true, 'count: 1 is good');
SELECT is(runq._check_count('x', 2147483647), true, 'count: the largest integer is good');
SELECT throws_ok($$SELECT runq._check_count('max_runs', 0)$$, '22023', 'max_runs must be at least 1, got 0',
                 'count: 0 raises');
SELECT throws_ok($$SELECT runq._check_count('max_runs', -1)$$, '22023', 'max_runs must be at least 1, got -1',
                 'count: -1 raises');
SELECT throws_ok($$SELECT runq._check_count('max_runs', NULL)$$, '22023', 'max_runs must be at least 1, got NULL',
                 'count: NULL raises');

-- ---------------------------------------------------------------------------
-- _check_duration: NULL (the default), or positive and under 1000 years
-- ---------------------------------------------------------------------------
SELECT is(runq._check_duration('x', NULL), true, 'duration: NULL is good');
SELECT is(runq._check_duration('x', interval '1 microsecond'), true, 'duration: one microsecond is good');
SELECT is(runq._check_duration('x', interval '999 years 11 months'), true, 'duration: just under 1000 years is good');
SELECT throws_ok($$SELECT runq._check_duration('lease', interval '0')$$, '22023',
                 'lease must be positive and under 1000 years, got 00:00:00', 'duration: 0 raises');
SELECT throws_ok($$SELECT runq._check_duration('lease', interval '-1 minute')$$, '22023',
                 'lease must be positive and under 1000 years, got -00:01:00', 'duration: negative raises');
SELECT throws_ok($$SELECT runq._check_duration('lease', interval '1000 years')$$, '22023',
                 'lease must be positive and under 1000 years, got 1000 years', 'duration: 1000 years raises');

-- ---------------------------------------------------------------------------
-- _check_object: a jsonb object
-- ---------------------------------------------------------------------------
SELECT is(runq._check_object('x', '{}'), true, 'object: {} is good');
SELECT is(runq._check_object('x', '{"a": [1]}'), true, 'object: an object with keys is good');
SELECT throws_ok($$SELECT runq._check_object('payload', '[1, 2]')$$, '22023',
                 'payload must be a jsonb object, got array', 'object: an array raises, naming its type');
SELECT throws_ok($$SELECT runq._check_object('payload', '"text"')$$, '22023',
                 'payload must be a jsonb object, got string', 'object: a string raises, naming its type');
SELECT throws_ok($$SELECT runq._check_object('payload', 'null')$$, '22023',
                 'payload must be a jsonb object, got null', 'object: jsonb null raises');
SELECT throws_ok($$SELECT runq._check_object('payload', NULL)$$, '22023',
                 'payload must be a jsonb object, got NULL', 'object: SQL NULL raises');

-- ---------------------------------------------------------------------------
-- _check_choice: one of a fixed set
-- ---------------------------------------------------------------------------
SELECT is(runq._check_choice('x', 'fail', 'resume, fail, zero_work'), true, 'choice: a listed word is good');
SELECT throws_ok($$SELECT runq._check_choice('recovery_policy', 'retry', 'resume, fail, zero_work')$$,
                 '22023', $m$recovery_policy must be one of resume, fail, zero_work, got 'retry'$m$,
                 'choice: a word not listed raises, naming the choices');
SELECT throws_ok($$SELECT runq._check_choice('recovery_policy', 'Resume', 'resume, fail, zero_work')$$,
                 '22023', $m$recovery_policy must be one of resume, fail, zero_work, got 'Resume'$m$,
                 'choice: words match exactly (no case folding)');
SELECT throws_ok($$SELECT runq._check_choice('recovery_policy', NULL, 'resume, fail, zero_work')$$,
                 '22023', 'recovery_policy must be one of resume, fail, zero_work, got NULL', 'choice: NULL raises');

-- ---------------------------------------------------------------------------
-- _check_classes: a non-empty one-dimensional array of 0..32767
-- ---------------------------------------------------------------------------
SELECT is(runq._check_classes('x', ARRAY[0]), true, 'classes: {0} is good');
SELECT is(runq._check_classes('x', ARRAY[32767, 5, 5]), true, 'classes: 32767 and repeats are good');
SELECT throws_ok($$SELECT runq._check_classes('classes', '{}')$$, '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got {}',
                 'classes: empty raises');
SELECT throws_ok($$SELECT runq._check_classes('classes', '{{1},{2}}')$$, '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got {{1},{2}}',
                 'classes: two-dimensional raises, naming the array');
SELECT throws_ok($$SELECT runq._check_classes('classes', ARRAY[1, NULL])$$, '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got NULL',
                 'classes: a NULL element raises, naming it');
SELECT throws_ok($$SELECT runq._check_classes('classes', ARRAY[-1])$$, '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got -1',
                 'classes: -1 raises');
SELECT throws_ok($$SELECT runq._check_classes('classes', ARRAY[1, 2, 32768, 3])$$, '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got 32768',
                 'classes: 32768 raises, named wherever it stands');
SELECT throws_ok($$SELECT runq._check_classes('classes', NULL)$$, '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got NULL',
                 'classes: NULL raises');

-- ---------------------------------------------------------------------------
-- _check_names: NULL (any), or a non-empty one-dimensional array without NULLs
-- ---------------------------------------------------------------------------
SELECT is(runq._check_names('x', NULL), true, 'names: NULL is good');
SELECT is(runq._check_names('x', ARRAY['a', 'a', '']), true, 'names: a list with repeats is good');
SELECT throws_ok($$SELECT runq._check_names('kinds', '{}')$$, '22023',
                 'kinds must be NULL or a non-empty one-dimensional array without NULLs, got {}',
                 'names: empty raises');
SELECT throws_ok($$SELECT runq._check_names('kinds', ARRAY['a', NULL])$$, '22023',
                 'kinds must be NULL or a non-empty one-dimensional array without NULLs, got {a,NULL}',
                 'names: a NULL element raises');
SELECT throws_ok($$SELECT runq._check_names('kinds', '{{a},{b}}')$$, '22023',
                 'kinds must be NULL or a non-empty one-dimensional array without NULLs, got {{a},{b}}',
                 'names: two-dimensional raises');

-- ---------------------------------------------------------------------------
-- _check_usage: a non-empty object of non-negative numbers; NULL only when
-- optional (usage, and a budget of it)
-- ---------------------------------------------------------------------------
SELECT is(runq._check_usage('x', '{"tokens": 0}'), true, 'usage: a zero is good');
SELECT is(runq._check_usage('x', '{"tokens": 1200, "cost_usd": 0.0123, "big": 123456789012345678901234567890.5}'),
          true, 'usage: several keys, fractions and 30 digits are good');
SELECT is(runq._check_usage('x', NULL, optional => true), true, 'usage: NULL is good when optional');
SELECT throws_ok(format('SELECT runq._check_usage(%L, %L)', 'usage', v.u), '22023',
                 'usage must be a non-empty object of non-negative numbers, got ' || coalesce(v.u, 'NULL'),
                 format('usage: %s raises, naming it', v.what))
  FROM (VALUES (1, '{}', 'an empty object'), (2, '{"tokens": -1}', 'a negative value'),
               (3, '{"tokens": "1"}', 'a string value'), (4, '{"tokens": null}', 'a null value'),
               (5, '{"tokens": [1]}', 'an array of a number'), (6, '{"tokens": []}', 'an empty array'),
               (7, '[1]', 'an array'), (8, 'null', 'a jsonb null'), (9, NULL, 'NULL when not optional'))
       AS v (n, u, what)
 ORDER BY v.n;
SELECT throws_ok($$SELECT runq._check_usage('budget', '{}', optional => true)$$, '22023',
                 'budget must be NULL or a non-empty object of non-negative numbers, got {}',
                 'usage: an empty object raises when optional, naming the rule with NULL');
SELECT throws_ok(format('SELECT runq._check_usage(%L, %L)', 'usage', '{"k": -' || repeat('1', 300) || '}'), '22023',
                 'usage must be a non-empty object of non-negative numbers, got ' || left('{"k": -' || repeat('1', 300), 200),
                 'usage: a long value is named by its first 200 characters');

-- ---------------------------------------------------------------------------
-- Every check is inlined: the plan holds its CASE, not a call of it
-- ---------------------------------------------------------------------------
SELECT pg_temp.plan($$SELECT runq._check_identifier('x', g::text) FROM generate_series(1, 3) AS g$$) AS p_identifier \gset
SELECT pg_temp.plan($$SELECT runq._check_identifier('x', g::text, optional => true) FROM generate_series(1, 3) AS g$$)
    AS p_optional \gset
SELECT pg_temp.plan($$SELECT runq._check_count('x', g) FROM generate_series(1, 3) AS g$$) AS p_count \gset
SELECT pg_temp.plan($$SELECT runq._check_duration('x', g * interval '1 second') FROM generate_series(1, 3) AS g$$)
    AS p_duration \gset
SELECT pg_temp.plan($$SELECT runq._check_object('x', jsonb_build_object('n', g)) FROM generate_series(1, 3) AS g$$)
    AS p_object \gset
SELECT pg_temp.plan($$SELECT runq._check_choice('x', g::text, '1, 2') FROM generate_series(1, 3) AS g$$)
    AS p_choice \gset
SELECT pg_temp.plan($$SELECT runq._check_classes('x', ARRAY[g]) FROM generate_series(1, 3) AS g$$) AS p_classes \gset
SELECT pg_temp.plan($$SELECT runq._check_names('x', ARRAY[g::text]) FROM generate_series(1, 3) AS g$$) AS p_names \gset
SELECT pg_temp.plan($$SELECT runq._check_usage('x', jsonb_build_object('n', g), g > 1) FROM generate_series(1, 3) AS g$$)
    AS p_usage \gset

SELECT matches(:'p_identifier'::text, 'Output: CASE WHEN .*length', '_check_identifier is inlined: a CASE over length()');
SELECT doesnt_match(:'p_identifier'::text, '_check_identifier', '_check_identifier is not called');
SELECT matches(:'p_optional'::text, 'Output: CASE WHEN .*IS NULL', '_check_identifier, optional, is inlined: a CASE');
SELECT doesnt_match(:'p_optional'::text, '_check_identifier', '_check_identifier, optional, is not called');
SELECT matches(:'p_count'::text, 'Output: CASE WHEN \(g >= 1\)', '_check_count is inlined: a CASE over g >= 1');
SELECT doesnt_match(:'p_count'::text, '_check_count', '_check_count is not called');
SELECT matches(:'p_duration'::text, 'Output: CASE WHEN .*1000 years', '_check_duration is inlined: a CASE');
SELECT doesnt_match(:'p_duration'::text, '_check_duration', '_check_duration is not called');
SELECT matches(:'p_object'::text, 'Output: CASE WHEN \(jsonb_typeof', '_check_object is inlined: a CASE over jsonb_typeof()');
SELECT doesnt_match(:'p_object'::text, '_check_object', '_check_object is not called');
SELECT matches(:'p_choice'::text, 'Output: CASE WHEN .*= ANY', '_check_choice is inlined: a CASE over = ANY');
SELECT doesnt_match(:'p_choice'::text, '_check_choice', '_check_choice is not called');
SELECT matches(:'p_classes'::text, 'Output: CASE WHEN .*>= ALL', '_check_classes is inlined: a CASE over ALL');
SELECT doesnt_match(:'p_classes'::text, '_check_classes', '_check_classes is not called');
SELECT matches(:'p_names'::text, 'Output: CASE WHEN .*array_position', '_check_names is inlined: a CASE over array_position()');
SELECT doesnt_match(:'p_names'::text, '_check_names', '_check_names is not called');
SELECT matches(:'p_usage'::text, 'Output: CASE WHEN .*jsonb_path_exists', '_check_usage is inlined: a CASE over jsonb_path_exists()');
SELECT doesnt_match(:'p_usage'::text, '_check_usage|_is_usage', '_check_usage and _is_usage are not called');

-- ---------------------------------------------------------------------------
-- A second bad call after a caught one still raises, and good calls work
-- ---------------------------------------------------------------------------
-- throws_ok catches each error in a subtransaction, so every call below runs
-- in this one transaction: after the first error PL/pgSQL plans the checking
-- expression afresh, and (but in claim, which forces a generic plan) a custom
-- plan folds the arguments into constants.
SELECT run_id AS any1 FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => 2100) \gset
SELECT run_id AS any2 FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => 2100) \gset
SELECT run_id AS kind1 FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => 2101) \gset
SELECT run_id AS kind2 FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => 2101) \gset

SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[2100], max_runs => 0)', '22023',
                 'max_runs must be at least 1, got 0', 'claim: bad max_runs raises');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[2100], max_runs => -1)', '22023',
                 'max_runs must be at least 1, got -1', 'claim: bad max_runs raises again');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[2100], max_runs => NULL)', '22023',
                 'max_runs must be at least 1, got NULL', 'claim: bad max_runs raises a third time');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[2101], max_runs => 0, kinds => ARRAY['k'])$$, '22023',
                 'max_runs must be at least 1, got 0', 'claim: bad max_runs with kinds raises');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[2101], max_runs => -5, kinds => ARRAY['k'])$$, '22023',
                 'max_runs must be at least 1, got -5', 'claim: bad max_runs with kinds raises again');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[2100], lease => interval '0')$$, '22023',
                 'lease must be positive and under 1000 years, got 00:00:00', 'claim: bad lease raises');
SELECT throws_ok($$SELECT * FROM runq.claim('{}')$$, '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got {}',
                 'claim: bad classes after a bad lease raises');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[2100, -1])', '22023',
                 'classes must be a non-empty one-dimensional array of classes between 0 and 32767, got -1',
                 'claim: bad classes raises again');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[2100], lease => interval '1000 years')$$, '22023',
                 'lease must be positive and under 1000 years, got 1000 years', 'claim: bad lease raises again');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[2101], kinds => ARRAY['k', NULL])$$, '22023',
                 'kinds must be NULL or a non-empty one-dimensional array without NULLs, got {k,NULL}',
                 'claim: bad kinds raises');
SELECT throws_ok($$SELECT * FROM runq.claim(ARRAY[2101], kinds => '{}')$$, '22023',
                 'kinds must be NULL or a non-empty one-dimensional array without NULLs, got {}',
                 'claim: bad kinds raises again');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE priority IN (2100, 2101) AND status = 'queued'), 4,
          'the rejected claims took nothing');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[2100])), :any1::bigint, 'claim: a good claim after them works');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[2101], kinds => ARRAY['k'], lease => interval '1 hour')), :kind1::bigint,
          'claim: a good claim with kinds after them works');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[2100], max_runs => 0)', '22023',
                 'max_runs must be at least 1, got 0', 'claim: bad max_runs after good claims still raises');
SELECT is((SELECT array_agg(run_id ORDER BY run_id) FROM runq.claim(ARRAY[2100, 2101], max_runs => 5)),
          ARRAY[:any2, :kind2]::bigint[], 'claim: and a good claim of several after that works');

SELECT throws_ok($$SELECT * FROM runq.orphan_report(interval '0')$$, '22023',
                 'stale_after must be positive, got 00:00:00', 'orphan_report: stale_after 0 raises');
SELECT throws_ok($$SELECT * FROM runq.orphan_report(interval '-1 minute')$$, '22023',
                 'stale_after must be positive, got -00:01:00',
                 'orphan_report: stale_after -1 minute raises again');
SELECT throws_ok($$SELECT * FROM runq.orphan_report(interval '0')$$, '22023',
                 'stale_after must be positive, got 00:00:00',
                 'orphan_report: stale_after 0 raises a third time');
SELECT is((SELECT sum(runs)::int FROM runq.orphan_report(interval '1 hour')), 4,
          'orphan_report: a good call after them reports the four running runs');
SELECT is((SELECT sum(runs)::int FROM runq.orphan_report()), 4, 'orphan_report: and so does the default');

SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => -1)$$, '22023',
                 'priority must be between 0 and 32767, got -1', 'submit: a bad priority raises');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => 32768)$$, '22023',
                 'priority must be between 0 and 32767, got 32768', 'submit: a bad priority raises again');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => NULL)$$, '22023',
                 'priority must be between 0 and 32767, got NULL', 'submit: a bad priority raises a third time');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => 2102, max_attempts => 0)$$,
                 '22023', 'max_attempts must be at least 1, got 0', 'submit: then a bad max_attempts raises');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'checks', kind => 'k', priority => 2102)), 'created',
          'submit: a good submit after them works');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE tenant_id = 'checks'), 5, 'and only the good submits made runs');

SELECT throws_ok($$SELECT runq.purge(interval '1 day', include_failed => NULL)$$, '22023',
                 'include_failed must be true or false, got NULL', 'purge: NULL include_failed raises');
SELECT throws_ok($$SELECT runq.purge(interval '1 day', include_failed => NULL)$$, '22023',
                 'include_failed must be true or false, got NULL', 'purge: NULL include_failed raises again');
SELECT throws_ok($$SELECT runq.purge(interval '1 day', include_failed => NULL)$$, '22023',
                 'include_failed must be true or false, got NULL', 'purge: NULL include_failed raises a third time');
SELECT throws_ok($$SELECT runq.purge(interval '-1 second')$$, '22023',
                 'older_than must be at least 0 and under 1000 years, got -00:00:01', 'purge: then a negative older_than raises');
SELECT is(runq.purge(interval '1 day', include_failed => true), 0::bigint, 'purge: a good purge after them works');
-- Past five calls the plan cache tries a generic plan, in which the check of
-- include_failed keeps its ELSE branch: _bad_argument is IMMUTABLE, so were
-- its arguments all constants there it would be run while planning. That is
-- why every call passes the checked value itself.
SELECT lives_ok($$SELECT runq.purge(interval '1 day', include_failed => g % 2 = 0) FROM generate_series(1, 10) AS g$$,
                'purge: ten good purges after them work (past the switch to a generic plan)');

SELECT throws_ok('SELECT * FROM runq.sweep(0)', '22023', 'max_runs must be at least 1, got 0', 'sweep: max_runs 0 raises');
SELECT throws_ok('SELECT * FROM runq.sweep(-1)', '22023', 'max_runs must be at least 1, got -1',
                 'sweep: max_runs -1 raises again');
SELECT is((SELECT count(*)::int FROM runq.sweep(10)), 0, 'sweep: a good sweep after them works');
SELECT throws_ok('SELECT * FROM runq.dead_letter(0)', '22023', 'max_runs must be at least 1, got 0',
                 'dead_letter: max_runs 0 raises');
SELECT throws_ok('SELECT * FROM runq.dead_letter(NULL)', '22023', 'max_runs must be at least 1, got NULL',
                 'dead_letter: max_runs NULL raises again');
SELECT is((SELECT count(*)::int FROM runq.dead_letter(10)), 0, 'dead_letter: a good call after them works');

SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', 'search', 'maybe')$$, :kind1), '22023',
                 $m$idempotency must be one of read_only, idempotent, non_idempotent, got 'maybe'$m$,
                 'begin_tool: a bad idempotency raises');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', 'search', NULL)$$, :kind1), '22023',
                 'idempotency must be one of read_only, idempotent, non_idempotent, got NULL',
                 'begin_tool: a bad idempotency raises again');
SELECT throws_ok(format($$SELECT runq.begin_tool(%s, 1, 'c1', 'search', 'read_only', '[]')$$, :kind1), '22023',
                 'args must be a jsonb object, got array', 'begin_tool: then bad args raise');
SELECT is(runq.begin_tool(:kind1, 1, 'c1', 'search', 'read_only'), true, 'begin_tool: a good call after them works');

-- ---------------------------------------------------------------------------
-- A NULL run_id is a bad argument, a missing run is RQ003
-- ---------------------------------------------------------------------------
SELECT throws_ok('SELECT runq._run_not_found(NULL)', '22023', 'run_id must be given, got NULL',
                 '_run_not_found: NULL is 22023');
SELECT throws_ok('SELECT runq._run_not_found(42)', 'RQ003', 'run 42 not found', '_run_not_found: an id is RQ003');

SELECT throws_ok('SELECT runq.cancel(NULL)', '22023', 'run_id must be given, got NULL', 'cancel: NULL run_id');
SELECT throws_ok('SELECT runq.cancel(9223372036854775807)', 'RQ003', 'run 9223372036854775807 not found',
                 'cancel: a missing run');
SELECT throws_ok('SELECT * FROM runq.get_run(NULL)', '22023', 'run_id must be given, got NULL', 'get_run: NULL run_id');
SELECT throws_ok('SELECT * FROM runq.get_run(9223372036854775807)', 'RQ003', 'run 9223372036854775807 not found',
                 'get_run: a missing run');
SELECT throws_ok('SELECT * FROM runq.run_events(NULL)', '22023', 'run_id must be given, got NULL',
                 'run_events: NULL run_id');
SELECT throws_ok('SELECT * FROM runq.run_events(9223372036854775807)', 'RQ003', 'run 9223372036854775807 not found',
                 'run_events: a missing run');
SELECT throws_ok('SELECT * FROM runq.tool_calls(NULL)', '22023', 'run_id must be given, got NULL',
                 'tool_calls: NULL run_id');
SELECT throws_ok('SELECT * FROM runq.tool_calls(9223372036854775807)', 'RQ003', 'run 9223372036854775807 not found',
                 'tool_calls: a missing run');
SELECT throws_ok('SELECT runq.redrive(NULL)', '22023', 'run_id must be given, got NULL', 'redrive: NULL run_id');
SELECT throws_ok('SELECT runq.redrive(9223372036854775807)', 'RQ003', 'run 9223372036854775807 not found',
                 'redrive: a missing run');
SELECT throws_ok($$SELECT runq.deliver_input(NULL, '{}')$$, '22023', 'run_id must be given, got NULL',
                 'deliver_input: NULL run_id');
SELECT throws_ok($$SELECT runq.deliver_input(9223372036854775807, '{}')$$, 'RQ003',
                 'run 9223372036854775807 not found', 'deliver_input: a missing run');
SELECT throws_ok('SELECT runq.deliver_input(9223372036854775807, NULL)', '22023', 'input must be a jsonb value, got NULL',
                 'deliver_input: NULL input, checked before the run is looked up');
SELECT throws_ok('SELECT runq.deliver_input(NULL, NULL)', '22023', 'input must be a jsonb value, got NULL',
                 'deliver_input: NULL input and NULL run_id: the input is named');

-- The lookups still find a run that is there.
SELECT is((SELECT status FROM runq.get_run(:kind1)), 'running', 'get_run: a run that is there');
SELECT is((SELECT array_agg(type ORDER BY event_id) FROM runq.run_events(:kind1)),
          ARRAY['run.created', 'run.claimed', 'run.tool_started'], 'run_events: its events');
SELECT is((SELECT call_id FROM runq.tool_calls(:kind1)), 'c1', 'tool_calls: its tool call');
SELECT is(runq.cancel(:kind1), 'cancel_requested', 'cancel: a run that is there');

-- ---------------------------------------------------------------------------
-- No runq role may call the checks
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE internal ON COMMIT DROP AS
SELECT f::regprocedure AS f
  FROM unnest(ARRAY['runq._bad_argument(text, text, anyelement)', 'runq._check_identifier(text, text, boolean)',
                    'runq._check_count(text, integer)', 'runq._check_duration(text, interval)',
                    'runq._check_object(text, jsonb)', 'runq._check_choice(text, text, text)',
                    'runq._check_classes(text, integer[])', 'runq._first_bad_class(integer[])',
                    'runq._check_names(text, text[])', 'runq._run_not_found(bigint)',
                    'runq._is_usage(jsonb)', 'runq._check_usage(text, jsonb, boolean)']) AS f;

SELECT is((SELECT array_agg(f::text ORDER BY f::text) FROM internal WHERE has_function_privilege('runq_client', f, 'EXECUTE')),
          NULL, 'runq_client may call none of the checks');
SELECT is((SELECT array_agg(f::text ORDER BY f::text) FROM internal WHERE has_function_privilege('runq_worker', f, 'EXECUTE')),
          NULL, 'runq_worker may call none of the checks');
SELECT is((SELECT array_agg(f::text ORDER BY f::text) FROM internal WHERE has_function_privilege('runq_admin', f, 'EXECUTE')),
          NULL, 'runq_admin may call none of the checks');
SELECT is((SELECT array_agg(f::text ORDER BY f::text) FROM internal WHERE has_function_privilege('public', f, 'EXECUTE')),
          NULL, 'PUBLIC may call none of the checks');
SELECT is((SELECT count(*)::int FROM internal), 12,
          'the twelve internal functions of argument_checks and argument_check_usage were checked');

SELECT * FROM finish();
ROLLBACK;
