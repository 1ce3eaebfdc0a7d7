-- Security: privileges on every relation from the catalog, and a
-- hostile search_path.
--
-- 1. Every table, view and sequence in runq, whatever it is called, for every
--    role of the contract and PUBLIC: table_privs_are / sequence_privs_are.
--    Nothing but SELECT on the views runq.queue_stats, limits and pauses for
--    runq_admin. (17_privileges
--    holds function_privs_are per role and function; the list here comes
--    from the catalog, so a relation added later is checked too.)
-- 2. A non-superuser places objects in public that shadow what runq's
--    functions use (sha256, jsonb_typeof, clock_timestamp, format, nextval,
--    cardinality, jsonb_build_object, pg_notify, runq's own helper names, the
--    = operator for text and for bigint, <, >, <= and >= for bigint (the
--    epoch rule's comparisons), <= for timestamptz (the deadline's), + for
--    numeric (the usage sums), tables named
--    like runq's) and temp tables named like runq's, then runs a whole
--    lifecycle with search_path = public, runq, pg_catalog. First it is shown
--    that the shadows do bite that session's own SQL; then that every runq
--    call behaves exactly as specified, because every runq function pins
--    search_path = pg_catalog, pg_temp and qualifies runq's objects.
--    (COALESCE, GREATEST, LEAST, NULLIF and EXTRACT are grammar, not
--    function lookups: they cannot be shadowed, so nothing tries.)
--
-- Results under the hostile path are captured with \gset and asserted after
-- RESET: pgTAP's own functions do not pin search_path, and the hostile = would
-- corrupt them. Errors are captured by pg_temp.outcome(), which has no SET
-- clause, so the statement it runs is parsed under the hostile path.
-- Classes 4000..4099.
BEGIN;
SELECT plan(155);

-- ---------------------------------------------------------------------------
-- 1. Privileges on every relation of the schema (catalog-driven)
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE roles (role name) ON COMMIT DROP;
INSERT INTO roles VALUES ('public'), ('runq_client'), ('runq_worker'), ('runq_admin');

-- What the loops below cover, so a new kind of relation cannot slip past.
SELECT is(ARRAY(SELECT c.relname::text || ':' || c.relkind::text FROM pg_catalog.pg_class AS c
                 WHERE c.relnamespace = 'runq'::regnamespace
                   AND c.relkind NOT IN ('i', 'c', 'I', 't')   -- indexes, composite types, TOAST
                 ORDER BY 1),
          ARRAY['checkpoints:r', 'idempotency_keys:r', 'idle_mark:S', 'inputs:r', 'limit_debts:r',
                'limit_settings:r', 'limits:v', 'model_calls:r', 'pause_settings:r', 'pauses:v',
                'progress_seq:S',
                'queue_stats:v', 'run_events:r', 'run_events_event_id_seq:S', 'run_output:r',
                'run_usage:r', 'runs:r', 'runs_run_id_seq:S', 'schedule_settings:r', 'schedules:v',
                'settings:r', 'spawns:r', 'tool_calls:r', 'watches:r'],
          'runq holds these tables, views and sequences (a new one must be added to the plan count)');

-- 19 tables and views x 4 grantees = 76 tests. The four views are
-- runq_admin's to read; nothing else is anyone's.
CREATE TEMP TABLE admin_views (relname name) ON COMMIT DROP;
INSERT INTO admin_views VALUES ('queue_stats'), ('limits'), ('pauses'), ('schedules');
SELECT table_privs_are('runq', c.relname, r.role,
                       CASE WHEN c.relname IN (SELECT relname FROM admin_views) AND r.role = 'runq_admin'
                            THEN ARRAY['SELECT'] ELSE ARRAY[]::name[] END,
                       format('%s has %s on runq.%s', r.role,
                              CASE WHEN c.relname IN (SELECT relname FROM admin_views) AND r.role = 'runq_admin'
                                   THEN 'only SELECT' ELSE 'no privilege' END, c.relname))
  FROM pg_catalog.pg_class AS c, roles AS r
 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
 ORDER BY c.relname, r.role;

-- 4 sequences x 4 grantees = 16 tests.
SELECT sequence_privs_are('runq', c.relname, r.role, ARRAY[]::name[],
                          format('%s has no privilege on sequence runq.%s', r.role, c.relname))
  FROM pg_catalog.pg_class AS c, roles AS r
 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind = 'S'
 ORDER BY c.relname, r.role;

-- Column grants do not show in table privileges: none exist either.
SELECT is(ARRAY(SELECT format('%s.%s to %s', c.relname, a.attname, r.role)
                  FROM pg_catalog.pg_class AS c
                  JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0
                                                   AND NOT a.attisdropped
                 CROSS JOIN roles AS r
                 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind IN ('r', 'v')
                   AND pg_catalog.has_column_privilege(r.role, c.oid, a.attnum,
                                                       'SELECT, INSERT, UPDATE, REFERENCES')
                   AND NOT (c.relname IN (SELECT relname FROM admin_views) AND r.role = 'runq_admin')
                 ORDER BY 1),
          ARRAY[]::text[], 'no role has a privilege on any runq column');

-- ---------------------------------------------------------------------------
-- 2. A hostile search_path
-- ---------------------------------------------------------------------------
SELECT 'runq_pgtap_attacker_' || pg_backend_pid() AS attacker \gset
CREATE ROLE :"attacker" NOLOGIN NOSUPERUSER;
GRANT runq_client, runq_worker, runq_admin TO :"attacker";
GRANT CREATE ON SCHEMA public TO :"attacker";

SET ROLE :"attacker";

-- The attacker's objects in public. Each returns a wrong answer, or raises.
CREATE FUNCTION public.sha256(bytea) RETURNS bytea LANGUAGE sql
    AS $$ SELECT '\x00'::bytea $$;
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql
    AS $$ SELECT 'object'::text $$;
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql
    AS $$ SELECT timestamptz '2000-01-01 00:00:00+00' $$;
CREATE FUNCTION public.format(text, VARIADIC text[]) RETURNS text LANGUAGE sql
    AS $$ SELECT 'pwned'::text $$;
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE sql
    AS $$ SELECT -1::bigint $$;
CREATE FUNCTION public.cardinality(integer[]) RETURNS integer LANGUAGE sql
    AS $$ SELECT 0 $$;
CREATE FUNCTION public.cardinality(text[]) RETURNS integer LANGUAGE sql
    AS $$ SELECT 0 $$;
CREATE FUNCTION public.jsonb_build_object(text, text, text, integer) RETURNS jsonb LANGUAGE sql
    AS $$ SELECT '{"pwned": true}'::jsonb $$;
CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'pwned by public.pg_notify'; END $$;
CREATE FUNCTION public._backoff(integer) RETURNS interval LANGUAGE sql
    AS $$ SELECT interval '1000 years' $$;
CREATE FUNCTION public._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval)
    RETURNS bytea LANGUAGE sql AS $$ SELECT '\x00'::bytea $$;
CREATE FUNCTION public._request_hash(text, jsonb, text, integer, timestamptz, integer, text, interval, jsonb, interval)
    RETURNS bytea LANGUAGE sql AS $$ SELECT '\x00'::bytea $$;
CREATE FUNCTION public._is_usage(jsonb) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION public.evil_numeric_add(numeric, numeric) RETURNS numeric LANGUAGE sql AS $$ SELECT 0::numeric $$;
CREATE OPERATOR public.+ (LEFTARG = numeric, RIGHTARG = numeric, FUNCTION = public.evil_numeric_add);
CREATE FUNCTION public.evil_text_eq(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.evil_text_eq);
CREATE FUNCTION public.evil_bigint_eq(bigint, bigint) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.evil_bigint_eq);
CREATE FUNCTION public.evil_bigint_cmp(bigint, bigint) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$;
CREATE OPERATOR public.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.evil_bigint_cmp);
CREATE OPERATOR public.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.evil_bigint_cmp);
CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.evil_bigint_cmp);
CREATE OPERATOR public.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.evil_bigint_cmp);
CREATE FUNCTION public.evil_ts_le(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$;
CREATE OPERATOR public.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.evil_ts_le);
CREATE TABLE public.runs (run_id bigint, status text, priority smallint);
INSERT INTO public.runs VALUES (4000, 'queued', 4000);
CREATE TABLE public.settings (lease interval);
INSERT INTO public.settings VALUES (interval '1 second');

-- And temp tables named like runq's: pg_temp comes first for relations in
-- the attacker's session, and last in runq's pinned path.
CREATE TEMP TABLE runs (run_id bigint, status text, priority smallint, payload jsonb);
INSERT INTO pg_temp.runs VALUES (4001, 'queued', 4000, '{"temp": true}');
CREATE TEMP TABLE settings (singleton boolean, lease interval, backoff_base interval,
                            backoff_cap interval, stale_after interval);
INSERT INTO pg_temp.settings VALUES (true, interval '1 second', interval '1000 years',
                                     interval '1000 years', interval '1 second');
CREATE TEMP TABLE run_events (run_id bigint, event_id bigint, epoch bigint, type text, payload jsonb,
                              created_at timestamptz);
CREATE TEMP TABLE idempotency_keys (tenant_id text, principal_id text, idempotency_key text,
                                    request_hash bytea, run_id bigint, created_at timestamptz);

-- Runs a statement under the caller's search_path; 'ok', or SQLSTATE and message.
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END $$;

SET search_path = public, runq, pg_catalog;

-- The shadows bite this session's own SQL.
SELECT 'a'::text = 'b'::text AS c_text_eq, 1::bigint = 2::bigint AS c_bigint_eq,
       2::bigint > 1::bigint OR 1::bigint < 2::bigint OR 1::bigint <= 1::bigint
           OR 1::bigint >= 1::bigint AS c_bigint_cmp,
       cardinality(ARRAY['a', 'b']) AS c_card_text,
       sha256('x') AS c_sha, clock_timestamp() AS c_clock, jsonb_typeof('[1]') AS c_typeof,
       (SELECT count(*) FROM runs) AS c_runs_rows, (SELECT payload FROM runs) AS c_runs_payload,
       now() <= now() AS c_ts_le, cardinality(ARRAY[1, 2]) AS c_card,
       format('%s', 'x'::text) AS c_format, 0.1::numeric + 0.2::numeric AS c_numeric_add \gset

-- The lifecycle, with runq's functions called as clients call them.
SELECT run_id AS r1, outcome AS o1
  FROM runq.submit(tenant_id => 'sec', kind => 'k', payload => '{"n": 1}', session_id => 'sec-s1',
                   priority => 4000, idempotency_key => 'sec-key') \gset
SELECT run_id AS r1_dup, outcome AS o1_dup
  FROM runq.submit(tenant_id => 'sec', kind => 'k', payload => '{"n": 1}', session_id => 'sec-s1',
                   priority => 4000, idempotency_key => 'sec-key') \gset
SELECT pg_temp.outcome($$SELECT * FROM runq.submit(tenant_id => 'sec', kind => 'k', payload => '{"n": 2}',
                         session_id => 'sec-s1', priority => 4000, idempotency_key => 'sec-key')$$) AS e_conflict,
       pg_temp.outcome($$SELECT * FROM runq.submit(tenant_id => 'sec', kind => 'k', session_id => 'sec-s1',
                         priority => 4000)$$) AS e_busy,
       pg_temp.outcome($$SELECT * FROM runq.submit(tenant_id => 'sec', kind => 'k', payload => '[1]')$$) AS e_array,
       pg_temp.outcome($$SELECT * FROM runq.submit(tenant_id => 'sec', kind => 'k',
                         recovery_policy => 'bogus')$$) AS e_policy,
       pg_temp.outcome($$SELECT * FROM runq.claim(ARRAY[]::integer[])$$) AS e_classes,
       pg_temp.outcome($$SELECT * FROM runq.get_run(-4000)$$) AS e_missing \gset

SELECT run_id AS c1_run, epoch AS c1_epoch, attempt AS c1_attempt, payload AS c1_payload,
       resumed AS c1_resumed, inputs AS c1_inputs
  FROM runq.claim(ARRAY[4000], worker_id => 'sec-w') \gset
SELECT runq.heartbeat(:r1, 1) AS hb1, runq.heartbeat(:r1, 0) AS hb_stale, runq.heartbeat(:r1, 99) AS hb_forged,
       runq.checkpoint(:r1, 1, '{"step": 1}') AS cp1, runq.begin_turn(:r1, 1) AS turn1,
       runq.begin_tool(:r1, 1, 'call-1', 'search', 'read_only', '{"q": "x"}') AS tool1 \gset
SELECT runq.record_usage(:r1, 1, '{"cost_usd": 0.1}') AS usage1 \gset
SELECT runq.record_usage(:r1, 1, '{"cost_usd": 0.2}') AS usage2 \gset
SELECT pg_temp.outcome('SELECT runq.record_usage(' || :r1 || ', 1, ''{"cost_usd": -1}'')') AS e_usage \gset
SELECT runq.end_tool(:r1, 1, 'call-1', '{"hits": 3}') AS tool1_end,
       runq.ask_user(:r1, 1, '{"question": "which?"}') AS asked \gset
SELECT outcome AS o_input FROM runq.submit(tenant_id => 'sec', kind => 'k', payload => '{"answer": "this"}',
                                           session_id => 'sec-s1', priority => 4000) \gset
SELECT count(*) AS c_kinds_none FROM runq.claim(ARRAY[4000], kinds => ARRAY['not-k']) \gset
SELECT run_id AS c2_run, epoch AS c2_epoch, attempt AS c2_attempt, checkpoint AS c2_checkpoint,
       inputs AS c2_inputs, resumed AS c2_resumed
  FROM runq.claim(ARRAY[4000], worker_id => 'sec-w', kinds => ARRAY['k']) \gset
SELECT runq.complete(:r1, 2, '{"done": true}') AS completed, runq.complete(:r1, 2) AS completed_again \gset
SELECT status AS g_status, attempts AS g_attempts, lease_epoch AS g_epoch, result AS g_result,
       created_at AS g_created, finished_at AS g_finished, usage AS g_usage
  FROM runq.get_run(:r1) \gset
SELECT runs AS rep_runs, usage AS rep_usage FROM runq.usage_report(now() - interval '1 hour') \gset
SELECT string_agg(type, ',' ORDER BY event_id) AS ev_types,
       (array_agg(payload ORDER BY event_id))[2] AS ev_claimed
  FROM runq.run_events(:r1) \gset
SELECT string_agg(call_id || ':' || status, ',') AS tc FROM runq.tool_calls(:r1) \gset

-- Recovery: a lease the sweep finds expired, a cancel, a failure, a redrive.
SELECT run_id AS r2 FROM runq.submit(tenant_id => 'sec', kind => 'k', priority => 4001) \gset
SELECT epoch AS r2_epoch FROM runq.claim(ARRAY[4001], lease => interval '1 millisecond') \gset
SELECT pg_sleep(0.01) AS slept \gset
SELECT string_agg(run_id || ':' || action, ',') AS swept FROM runq.sweep() \gset
SELECT status AS r2_status, attempts AS r2_attempts, scheduled_for AS r2_scheduled
  FROM runq.get_run(:r2) \gset
-- A deadline passes (the hostile <= for timestamptz would never see it pass).
SELECT run_id AS r5 FROM runq.submit(tenant_id => 'sec', kind => 'k', priority => 4004,
                                     timeout => interval '1 millisecond') \gset
SELECT epoch AS r5_epoch FROM runq.claim(ARRAY[4004], lease => interval '1 hour') \gset
SELECT pg_sleep(0.01) AS slept \gset
SELECT runq.heartbeat(:r5, 1) AS r5_alive \gset
SELECT status AS r5_status, failure ->> 'code' AS r5_code FROM runq.get_run(:r5) \gset
SELECT run_id AS r3 FROM runq.submit(tenant_id => 'sec', kind => 'k', priority => 4002) \gset
SELECT runq.cancel(:r3, 'not needed') AS r3_cancel \gset
SELECT run_id AS r4 FROM runq.submit(tenant_id => 'sec', kind => 'k', priority => 4003) \gset
SELECT epoch AS r4_epoch FROM runq.claim(ARRAY[4003]) \gset
SELECT runq.fail(:r4, 1, '{"code": "boom"}') AS r4_failed \gset
SELECT failure AS r4_failure FROM runq.get_run(:r4) \gset
SELECT runq.set_budget(:r4, '{"tokens": 10}') AS r4_budget_set \gset
SELECT budget AS r4_budget FROM runq.get_run(:r4) \gset
SELECT runq.redrive(:r4, 'retry') AS r4_redriven \gset
SELECT status AS r4_status FROM runq.get_run(:r4) \gset
SELECT count(*) AS dl FROM runq.dead_letter() \gset
SELECT coalesce(sum(runs), 0) AS orphans FROM runq.orphan_report() \gset
SELECT ready AS qs_ready FROM runq.queue_stats WHERE priority = 4003 \gset

RESET search_path;
RESET ROLE;

-- The shadows were live in the attacker's session...
SELECT ok(:'c_text_eq' AND :'c_bigint_eq', 'control: the hostile = for text and bigint answers true in the caller''s session');
SELECT ok(NOT :'c_bigint_cmp', 'control: the hostile <, >, <= and >= for bigint answer false in the caller''s session');
SELECT is(:'c_sha'::bytea, '\x00'::bytea, 'control: the hostile sha256 answers in the caller''s session');
SELECT is(:'c_clock'::timestamptz, '2000-01-01 00:00:00+00'::timestamptz, 'control: the hostile clock_timestamp answers');
SELECT is(:'c_typeof'::text, 'object', 'control: the hostile jsonb_typeof answers');
SELECT is(:'c_runs_rows'::int, 1, 'control: an unqualified runs is the temp table in the caller''s session');
SELECT is(:'c_runs_payload'::jsonb, '{"temp": true}'::jsonb, 'control: ... holding its fake run');
SELECT ok(NOT :'c_ts_le', 'control: the hostile <= for timestamptz answers false');
SELECT is(:'c_card' || '/' || :'c_card_text', '0/0', 'control: the hostile cardinality answers, for integer[] and text[]');
SELECT is(:'c_format'::text, 'pwned', 'control: the hostile format answers');
SELECT is(:'c_numeric_add'::numeric, 0::numeric, 'control: the hostile + for numeric answers 0');

-- ...and runq behaved exactly as specified.
SELECT is(:'o1'::text, 'created', 'submit creates the run');
SELECT is(:'o1_dup' || ' ' || :'r1_dup', 'duplicate ' || :'r1', 'the same request with the same key is a duplicate of it');
SELECT matches(:'e_conflict'::text, '^RQ001 ', 'the same key with another payload is RQ001 (runq hashes with pg_catalog.sha256)');
SELECT matches(:'e_busy'::text, '^RQ002 ', 'a second run in the busy session is RQ002');
SELECT is(:'e_array'::text, '22023 payload must be a jsonb object, got array',
          'an array payload is 22023 (pg_catalog.jsonb_typeof), named in the message');
SELECT is(:'e_policy'::text, '22023 recovery_policy must be one of resume, fail, zero_work, got ''bogus''',
          'an unknown policy is 22023, its message made by pg_catalog.format');
SELECT matches(:'e_classes'::text, '^22023 classes must be a non-empty', 'empty classes are 22023');
SELECT is(:'e_missing'::text, 'RQ003 run -4000 not found', 'an unknown run is RQ003');

SELECT is(:'c1_run'::bigint, :'r1'::bigint, 'claim takes the run, not the fake temp or public one');
SELECT is(:'c1_epoch' || '/' || :'c1_attempt', '1/1', 'first claim: epoch 1, attempt 1');
SELECT is(:'c1_payload'::jsonb, '{"n": 1}'::jsonb, 'the payload is the submitted one');
SELECT is(:'c1_resumed' || ' ' || :'c1_inputs', 'f []', 'a first claim is not resumed and has no inputs');
SELECT is((SELECT r.lease::interval FROM runq.runs AS r WHERE r.run_id = :r1), (SELECT s.lease FROM runq.settings AS s),
          'the lease is runq.settings'' (not the temp or public settings)');
SELECT ok(:'hb1' AND NOT :'hb_stale' AND NOT :'hb_forged',
          'heartbeat: true under the epoch, false under a stale one and under one never had (bigint = is pg_catalog''s)');
SELECT ok(:'cp1' AND :'turn1' AND :'tool1' AND :'tool1_end' AND :'asked', 'checkpoint, begin_turn, begin_tool, end_tool, ask_user all apply');
SELECT is(:'o_input'::text, 'input_delivered', 'a submit to the waiting session delivers input');
SELECT is(:'c_kinds_none'::int, 0, 'a claim by another kind takes nothing (text = and cardinality are pg_catalog''s)');
SELECT is(:'c2_epoch' || '/' || :'c2_attempt' || '/' || :'c2_resumed', '2/1/t', 'the second claim, by kind: epoch 2, attempt 1, resumed');
SELECT is(:'c2_checkpoint'::jsonb, '{"step": 1}'::jsonb, 'it resumes from the checkpoint (nextval was pg_catalog''s)');
SELECT is(:'c2_inputs'::jsonb, '[{"answer": "this"}]'::jsonb, 'with the delivered input');
SELECT ok(:'completed' AND NOT :'completed_again', 'complete applies once, then is fenced');
SELECT is(:'g_status' || '/' || :'g_attempts' || '/' || :'g_epoch', 'succeeded/1/2', 'get_run: succeeded, attempt 1, epoch 2');
SELECT is(:'g_result'::jsonb, '{"done": true}'::jsonb, 'the result is stored');
SELECT ok(:'g_created'::timestamptz > clock_timestamp() - interval '1 hour'
          AND :'g_finished'::timestamptz > :'g_created'::timestamptz,
          'times come from pg_catalog.clock_timestamp, not the year 2000');
SELECT is(:'ev_types'::text, 'run.created,run.claimed,run.fenced,run.checkpointed,run.turn_started,'
                             'run.tool_started,run.usage,run.usage,run.tool_finished,run.waiting_for_user,'
                             'run.input_delivered,'
                             'run.claimed,run.succeeded,run.fenced',
          'the events, in order, with a run.fenced for the stale heartbeat (none for the epoch never had) and one for the second complete');
SELECT is(:'ev_claimed'::jsonb, '{"worker_id": "sec-w", "attempt": 1}'::jsonb,
          'run.claimed carries worker and attempt (pg_catalog.jsonb_build_object)');
SELECT is(:'tc'::text, 'call-1:finished', 'the tool call finished');
SELECT ok(:'usage1' AND :'usage2', 'record_usage applies');
SELECT is(:'g_usage'::jsonb, '{"cost_usd": 0.3}'::jsonb, 'the usage totals are exact sums (numeric + is pg_catalog''s)');
SELECT matches(:'e_usage'::text, '^22023 usage must be a non-empty object of non-negative numbers',
               'negative usage is 22023 (runq._is_usage, not public''s)');
SELECT is(:'rep_runs' || ' ' || :'rep_usage', '1 {"cost_usd": 0.3}', 'usage_report sums the ledger exactly');

SELECT is(:'swept'::text, :'r2' || ':requeued', 'the sweep requeues the expired lease');
SELECT ok(:'r2_status' = 'queued' AND :'r2_scheduled'::timestamptz < clock_timestamp() + interval '1 minute',
          'requeued with runq._backoff''s delay, not a hostile one');
SELECT is(:'r3_cancel'::text, 'cancelled', 'cancel cancels a queued run');
SELECT ok(:'r4_failed', 'fail applies');
SELECT is(:'r4_failure'::jsonb - 'at', '{"code": "boom", "message": "boom", "attempt": 1, "epoch": 1}'::jsonb,
          'the failure gets its message from its code');
SELECT ok(:'r4_redriven' AND :'r4_status' = 'queued', 'redrive requeues the failed run');
SELECT is(:'r4_budget_set' || ' ' || :'r4_budget', 't {"tokens": 10}', 'set_budget sets the failed run''s budget');
SELECT is(:'r5_epoch' || '/' || :'r5_alive', '1/f', 'the heartbeat past a 1 ms timeout returns false');
SELECT is(:'r5_status' || ' ' || :'r5_code', 'failed deadline_exceeded', 'and fails the run deadline_exceeded');
SELECT ok(:'dl'::int >= 0 AND :'orphans'::int >= 0, 'dead_letter and orphan_report answer');
SELECT is(:'qs_ready'::int, 1, 'queue_stats counts the redriven run as ready');

-- Nothing was written where the attacker's objects are.
SELECT is((SELECT count(*)::int FROM public.runs), 1, 'public.runs is untouched');
SELECT is((SELECT count(*)::int FROM pg_temp.runs), 1, 'the temp runs is untouched');
SELECT is((SELECT count(*)::int FROM pg_temp.run_events) + (SELECT count(*)::int FROM pg_temp.idempotency_keys), 0,
          'the temp run_events and idempotency_keys are untouched');
SELECT is((SELECT count(*)::int FROM runq.runs AS r WHERE r.tenant_id = 'sec'), 5, 'runq.runs holds the five runs');

SELECT * FROM finish();
ROLLBACK;
