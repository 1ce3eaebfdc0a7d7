-- The public surface: every function of docs/contract.md exists with the
-- contract's argument names, types and defaults and its result columns, is
-- SECURITY DEFINER with a pinned search_path and a comment; classes are
-- integer parameters, so callers need no casts.
BEGIN;
SELECT plan(286);

CREATE TEMP TABLE contract (fn name, argtypes name[], args text, result text) ON COMMIT DROP;
INSERT INTO contract VALUES
    -- submitters
    ('submit',
     ARRAY['text', 'text', 'jsonb', 'text', 'integer', 'text', 'text', 'timestamp with time zone',
           'integer', 'text', 'interval', 'jsonb', 'interval'],
     'tenant_id text, kind text, payload jsonb DEFAULT ''{}''::jsonb, session_id text DEFAULT NULL::text, '
     'priority integer DEFAULT 10, idempotency_key text DEFAULT NULL::text, '
     'principal_id text DEFAULT NULL::text, '
     'scheduled_for timestamp with time zone DEFAULT NULL::timestamp with time zone, '
     'max_attempts integer DEFAULT 3, recovery_policy text DEFAULT ''resume''::text, '
     'queue_ttl interval DEFAULT NULL::interval, budget jsonb DEFAULT NULL::jsonb, '
     'timeout interval DEFAULT NULL::interval',
     'TABLE(run_id bigint, outcome text)'),
    ('deliver_input', ARRAY['bigint', 'jsonb'], 'run_id bigint, input jsonb', 'boolean'),
    ('cancel', ARRAY['bigint', 'text'], 'run_id bigint, reason text DEFAULT NULL::text', 'text'),
    ('get_run', ARRAY['bigint'], 'run_id bigint', 'runq.run_info'),
    ('run_events', ARRAY['bigint'], 'run_id bigint', 'SETOF runq.run_event'),
    -- waiting for a run and its output
    ('watch', ARRAY['bigint'], 'run_id bigint', 'runq.run_info'),
    ('unwatch', ARRAY['bigint'], 'run_id bigint', 'boolean'),
    ('read_output', ARRAY['bigint', 'bigint', 'integer'],
     'run_id bigint, after_seq bigint DEFAULT 0, max_chunks integer DEFAULT 1000',
     'TABLE(seq bigint, epoch bigint, chunk jsonb, created_at timestamp with time zone)'),
    ('emit', ARRAY['bigint', 'bigint', 'jsonb[]'], 'run_id bigint, epoch bigint, chunks jsonb[]', 'boolean'),
    -- child runs
    ('spawn',
     ARRAY['bigint', 'bigint', 'text', 'text', 'jsonb', 'integer', 'integer', 'text', 'interval', 'jsonb'],
     'run_id bigint, epoch bigint, key text, kind text, payload jsonb DEFAULT ''{}''::jsonb, '
     'priority integer DEFAULT NULL::integer, max_attempts integer DEFAULT 3, '
     'recovery_policy text DEFAULT ''resume''::text, timeout interval DEFAULT NULL::interval, '
     'budget jsonb DEFAULT NULL::jsonb',
     'bigint'),
    ('wait_children', ARRAY['bigint', 'bigint'], 'run_id bigint, epoch bigint', 'boolean'),
    ('children', ARRAY['bigint'], 'run_id bigint', 'SETOF runq.child_info'),
    -- workers
    ('claim', ARRAY['integer[]', 'text', 'interval', 'integer', 'text[]'],
     'classes integer[], worker_id text DEFAULT NULL::text, lease interval DEFAULT NULL::interval, '
     'max_runs integer DEFAULT 1, kinds text[] DEFAULT NULL::text[]',
     'TABLE(run_id bigint, epoch bigint, tenant_id text, session_id text, kind text, priority integer, '
     'payload jsonb, attempt integer, checkpoint jsonb, inputs jsonb, resumed boolean, '
     'lease_expires_at timestamp with time zone, deadline timestamp with time zone, budget jsonb, usage jsonb)'),
    ('heartbeat', ARRAY['bigint', 'bigint'], 'run_id bigint, epoch bigint', 'boolean'),
    ('record_model_call', ARRAY['bigint', 'bigint', 'bigint', 'text', 'jsonb', 'jsonb'],
     'run_id bigint, epoch bigint, seq bigint, request_hash text, response jsonb, usage jsonb DEFAULT NULL::jsonb',
     'boolean'),
    ('model_calls', ARRAY['bigint'], 'run_id bigint',
     'TABLE(seq bigint, epoch bigint, applied boolean, request_hash text, response jsonb, usage jsonb, '
     'created_at timestamp with time zone)'),
    ('complete', ARRAY['bigint', 'bigint', 'jsonb'],
     'run_id bigint, epoch bigint, result jsonb DEFAULT NULL::jsonb', 'boolean'),
    ('fail', ARRAY['bigint', 'bigint', 'jsonb'], 'run_id bigint, epoch bigint, failure jsonb', 'boolean'),
    ('release', ARRAY['bigint', 'bigint'], 'run_id bigint, epoch bigint', 'boolean'),
    ('ask_user', ARRAY['bigint', 'bigint', 'jsonb'], 'run_id bigint, epoch bigint, question jsonb', 'boolean'),
    ('checkpoint', ARRAY['bigint', 'bigint', 'jsonb'], 'run_id bigint, epoch bigint, state jsonb', 'boolean'),
    ('begin_turn', ARRAY['bigint', 'bigint'], 'run_id bigint, epoch bigint', 'boolean'),
    ('begin_tool', ARRAY['bigint', 'bigint', 'text', 'text', 'text', 'jsonb'],
     'run_id bigint, epoch bigint, call_id text, tool text, idempotency text, args jsonb DEFAULT ''{}''::jsonb',
     'boolean'),
    ('end_tool', ARRAY['bigint', 'bigint', 'text', 'jsonb'],
     'run_id bigint, epoch bigint, call_id text, outcome jsonb', 'boolean'),
    ('heartbeat_many', ARRAY['bigint[]', 'bigint[]'], 'run_ids bigint[], epochs bigint[]',
     'TABLE(run_id bigint, alive boolean)'),
    ('complete_many', ARRAY['bigint[]', 'bigint[]', 'jsonb[]'],
     'run_ids bigint[], epochs bigint[], results jsonb[] DEFAULT NULL::jsonb[]',
     'TABLE(run_id bigint, completed boolean)'),
    -- complete_and_claim: one round trip and one transaction a cycle
    ('complete_and_claim',
     ARRAY['bigint', 'bigint', 'jsonb', 'integer[]', 'text', 'interval', 'integer', 'text[]', 'boolean'],
     'run_id bigint, epoch bigint, result jsonb, classes integer[], worker_id text DEFAULT NULL::text, '
     'lease interval DEFAULT NULL::interval, max_runs integer DEFAULT 1, kinds text[] DEFAULT NULL::text[], '
     'claim_if_fenced boolean DEFAULT false',
     'SETOF runq.completed_and_claimed'),
    ('record_usage', ARRAY['bigint', 'bigint', 'jsonb'], 'run_id bigint, epoch bigint, usage jsonb', 'boolean'),
    ('tool_calls', ARRAY['bigint'], 'run_id bigint',
     'TABLE(call_id text, tool text, idempotency text, status text, epoch bigint, args jsonb, '
     'outcome jsonb, started_at timestamp with time zone, finished_at timestamp with time zone)'),
    -- operators
    ('sweep', ARRAY['integer'], 'max_runs integer DEFAULT 1000', 'TABLE(run_id bigint, action text)'),
    ('redrive', ARRAY['bigint', 'text'], 'run_id bigint, reason text DEFAULT NULL::text', 'boolean'),
    ('orphan_report', ARRAY['interval'], 'stale_after interval DEFAULT NULL::interval',
     'TABLE(lease_owner text, stale boolean, did_work boolean, runs bigint, '
     'oldest_heartbeat_at timestamp with time zone)'),
    ('list_runs', ARRAY['text', 'text', 'text', 'bigint', 'integer'],
     'status text DEFAULT NULL::text, tenant_id text DEFAULT NULL::text, kind text DEFAULT NULL::text, '
     'before_run_id bigint DEFAULT NULL::bigint, max_runs integer DEFAULT 50',
     'SETOF runq.run_info'),
    ('throughput', ARRAY['timestamp with time zone'], 'since timestamp with time zone',
     'TABLE(minute timestamp with time zone, started bigint, finished bigint)'),
    ('recovery_totals', ARRAY[]::name[], '', 'TABLE(fenced bigint, requeued bigint)'),
    ('set_limit', ARRAY['text', 'text', 'integer'], 'scope text, key text, max_running integer', 'void'),
    ('pause', ARRAY['text', 'text', 'text'], 'scope text, key text, reason text DEFAULT NULL::text', 'boolean'),
    ('resume', ARRAY['text', 'text'], 'scope text, key text', 'boolean'),
    ('set_budget', ARRAY['bigint', 'jsonb'], 'run_id bigint, budget jsonb', 'boolean'),
    ('usage_report', ARRAY['timestamp with time zone', 'timestamp with time zone'],
     'since timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone',
     'TABLE(tenant_id text, kind text, runs bigint, usage jsonb)'),
    -- dead_letter: the CLI's `runq failed` needs the dead letter as a
    -- function, since clients reach no table directly
    ('dead_letter', ARRAY['integer'], 'max_runs integer DEFAULT 100', 'SETOF runq.run_info'),
    -- purge: runq never deletes a run by itself, and operators
    -- reach no table, so old finished runs leave through this function
    ('purge', ARRAY['interval', 'integer', 'boolean'],
     'older_than interval, max_runs integer DEFAULT 1000, include_failed boolean DEFAULT false', 'bigint'),
    -- schedules
    ('create_schedule',
     ARRAY['text', 'text', 'text', 'text', 'interval', 'jsonb', 'integer', 'text', 'integer', 'text',
           'interval', 'interval'],
     'name text, tenant_id text, kind text, cron text DEFAULT NULL::text, '
     'every interval DEFAULT NULL::interval, payload jsonb DEFAULT ''{}''::jsonb, '
     'priority integer DEFAULT 10, timezone text DEFAULT ''UTC''::text, max_attempts integer DEFAULT 3, '
     'recovery_policy text DEFAULT ''resume''::text, queue_ttl interval DEFAULT NULL::interval, '
     'timeout interval DEFAULT NULL::interval',
     'boolean'),
    ('drop_schedule', ARRAY['text'], 'name text', 'boolean'),
    ('tick', ARRAY['integer'], 'max_runs integer DEFAULT 100',
     'TABLE(schedule text, slot timestamp with time zone, run_id bigint, outcome text)');

-- The public functions are exactly the contract's (helpers start with '_').
SELECT is(
    ARRAY(SELECT p.proname::text FROM pg_catalog.pg_proc AS p
           WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_'
           ORDER BY 1),
    ARRAY(SELECT fn::text FROM contract ORDER BY 1),
    'runq has exactly the public functions of the contract, one signature each');

-- 32 functions x 6 tests.
SELECT has_function('runq', fn, argtypes, format('runq.%s(%s) exists', fn, array_to_string(argtypes, ', ')))
  FROM contract ORDER BY fn;
SELECT is((SELECT string_agg(pg_catalog.pg_get_function_arguments(p.oid), ' | ')
             FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'runq'::regnamespace AND p.proname = c.fn),
          c.args, format('runq.%s has the contract''s parameter names, types and defaults', c.fn))
  FROM contract AS c ORDER BY fn;
SELECT is((SELECT string_agg(pg_catalog.pg_get_function_result(p.oid), ' | ')
             FROM pg_catalog.pg_proc AS p
            WHERE p.pronamespace = 'runq'::regnamespace AND p.proname = c.fn),
          c.result, format('runq.%s returns %s', c.fn, c.result))
  FROM contract AS c ORDER BY fn;
SELECT is_definer('runq', fn, argtypes, format('runq.%s is SECURITY DEFINER', fn))
  FROM contract ORDER BY fn;
SELECT ok(EXISTS (SELECT FROM pg_catalog.pg_proc AS p, unnest(p.proconfig) AS cfg
                   WHERE p.pronamespace = 'runq'::regnamespace AND p.proname = c.fn
                     AND cfg LIKE 'search_path=%' AND cfg LIKE '%pg_temp'
                     AND cfg NOT LIKE '%public%' AND cfg NOT LIKE '%$user%'),
          format('runq.%s pins search_path (pg_temp last, no public)', c.fn))
  FROM contract AS c ORDER BY fn;
SELECT ok(EXISTS (SELECT FROM pg_catalog.pg_proc AS p
                   WHERE p.pronamespace = 'runq'::regnamespace AND p.proname = c.fn
                     AND coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') <> ''),
          format('runq.%s has a comment', c.fn))
  FROM contract AS c ORDER BY fn;

-- get_run returns the run_info row type (checked column by column in 01_schema).
SELECT is((SELECT p.prorettype::regtype FROM pg_catalog.pg_proc AS p
            WHERE p.oid = 'runq.get_run(bigint)'::regprocedure),
          'runq.run_info'::regtype, 'runq.get_run returns runq.run_info');

-- queue_stats is a view with the contract's columns.
SELECT has_view('runq', 'queue_stats', 'runq.queue_stats is a view');
SELECT columns_are('runq', 'queue_stats',
    ARRAY['priority', 'ready', 'scheduled', 'running', 'waiting_for_user', 'failed', 'oldest_ready_age',
          'waiting_for_children']);
-- So are limits and pauses.
SELECT has_view('runq', 'limits', 'the limits are a view');
SELECT columns_are('runq', 'limits', ARRAY['scope', 'key', 'max_running', 'running']);
SELECT has_view('runq', 'pauses', 'the pauses are a view');
SELECT columns_are('runq', 'pauses', ARRAY['scope', 'key', 'reason', 'paused_at']);

-- ---------------------------------------------------------------------------
-- Classes are integer parameters: no casts from any client
-- ---------------------------------------------------------------------------
SELECT lives_ok($$SELECT * FROM runq.claim(ARRAY[0, 10])$$,
                'runq.claim(ARRAY[0,10]) works without casts');
SELECT lives_ok($$SELECT * FROM runq.claim(classes => ARRAY[20], worker_id => 'w', lease => '30 seconds', max_runs => 2)$$,
                'runq.claim works in named notation with untyped literals');
SELECT lives_ok($$SELECT * FROM runq.claim(ARRAY[20], kinds => '{chat.turn}')$$,
                'runq.claim takes kinds in named notation as an untyped literal');
SELECT results_eq(
    $$SELECT outcome FROM runq.submit(tenant_id => 'acme', kind => 'chat.turn', session_id => 's1', priority => 0)$$,
    $$VALUES ('created'::text)$$,
    'runq.submit(..., priority => 0) works without casts');
SELECT results_eq(
    $$SELECT outcome FROM runq.submit('acme', 'chat.turn', '{"a": 1}', 's2', 20)$$,
    $$VALUES ('created'::text)$$,
    'runq.submit works in positional notation with untyped literals');
SELECT is((SELECT r.priority FROM runq.get_run((SELECT max(x.run_id) FROM runq.runs AS x)) AS r),
          20, 'get_run reports the class as an integer');

-- A v0.1.0 call still works: positional with its eleven arguments, and the
-- twelfth and thirteenth (budget, timeout) positional too.
SELECT results_eq(
    $$SELECT outcome FROM runq.submit('acme', 'chat.turn', '{}', 's3', 20, NULL, NULL, NULL, 3, 'resume', NULL)$$,
    $$VALUES ('created'::text)$$,
    'runq.submit takes the eleven positional arguments of v0.1.0');
SELECT results_eq(
    $$SELECT outcome FROM runq.submit('acme', 'chat.turn', '{}', 's4', 20, NULL, NULL, NULL, 3, 'resume', NULL,
                                      '{"cost_usd": 2.00}', '1 hour')$$,
    $$VALUES ('created'::text)$$,
    'runq.submit takes budget and timeout positionally, untyped');

SELECT * FROM finish();
ROLLBACK;
