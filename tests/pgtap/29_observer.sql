-- The read-only surface (v0.2): role runq_observer, runq.list_runs,
-- runq.throughput and runq.recovery_totals. runq_observer changes nothing:
-- what it may EXECUTE is exactly get_run, run_events, tool_calls,
-- dead_letter, orphan_report, usage_report, list_runs, throughput and
-- recovery_totals, each STABLE; it may SELECT queue_stats, limits, pauses and
-- schedules and nothing else; every other public function (called with NULL
-- arguments, generated from the catalog), every table and sequence (SELECT,
-- INSERT, UPDATE, DELETE, TRUNCATE) and every write into a view refuse a
-- role that is a member of runq_observer only (42501); what it is granted
-- works for it and shows the right data, and leaves every table as it was.
-- list_runs: newest first, every combination of status, tenant and kind
-- equals a naive query (ORDER BY run_id DESC LIMIT n) and get_run's columns
-- over runs in all six statuses of three tenants and two kinds; max_runs and
-- before_run_id; keyset pages walk every run once; 22023 naming the value for
-- an unknown status, an empty or over-long tenant_id or kind, max_runs NULL or
-- below 1, changing nothing; the buffers a call touches do not grow with
-- 200,000 more runs stored. throughput: run.claimed counts as started and
-- run.succeeded, run.failed and run.cancelled as finished in their UTC minute
-- since `since` (inclusive), other events not at all, empty minutes absent;
-- 22023 for NULL or infinite since. recovery_totals: the stored run.fenced and
-- run.requeued events, up by one after a stale heartbeat and after the sweep
-- of an expired lease. Classes 2900..2999; tenants, kinds, workers and
-- schedules named ob-*.
BEGIN;
SELECT plan(249);

\ir helpers/recovery.sql

-- A role that holds runq_observer and nothing else: what a dashboard logs in
-- as. Roles are cluster-wide, so the name is this backend's.
SELECT 'runq_pgtap_observer_' || pg_backend_pid() AS obs \gset
CREATE ROLE :"obs" NOLOGIN IN ROLE runq_observer;

-- Everything runq stores, as one digest per table and sequence: what the
-- observer's calls must leave as it is. Read as the superuser.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_rel record;
    v_digest text;
    v_all text := '';
BEGIN
    FOR v_rel IN SELECT c.relname, c.relkind FROM pg_catalog.pg_class AS c
                  WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind IN ('r', 'S')
                  ORDER BY c.relname LOOP
        IF v_rel.relkind = 'S' THEN
            EXECUTE format('SELECT last_value || '' '' || is_called FROM runq.%I', v_rel.relname) INTO v_digest;
        ELSE
            EXECUTE format('SELECT md5(coalesce(string_agg(t::text, E''\n'' ORDER BY t::text), '''')) FROM runq.%I AS t',
                           v_rel.relname) INTO v_digest;
        END IF;
        v_all := v_all || v_rel.relname || ' ' || v_digest || E'\n';
    END LOOP;
    RETURN v_all;
END $$;

-- ---------------------------------------------------------------------------
-- Fixture: two runs of each status, tenant (ob-t1..3) and kind (ob-k1..2), 72
-- in all, submitted with the statuses interleaved; the class says the status
-- each is taken to (2900 queued, 2901 running, 2902 waiting_for_user, 2903
-- succeeded, 2904 failed, 2905 cancelled).
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE obruns (run_id bigint PRIMARY KEY, tenant text, kind text, status text, epoch bigint)
    ON COMMIT DROP;
GRANT SELECT ON obruns TO PUBLIC;
DO $$
DECLARE
    c_statuses constant text[] := ARRAY['queued', 'running', 'waiting_for_user', 'succeeded', 'failed',
                                        'cancelled'];
    v_run bigint;
    v_claim record;
BEGIN
    FOR g IN 0..71 LOOP
        SELECT s.run_id INTO v_run
          FROM runq.submit(tenant_id => 'ob-t' || (g / 6 % 3 + 1), kind => 'ob-k' || (g / 18 % 2 + 1),
                           priority => 2900 + g % 6) AS s;
        INSERT INTO obruns VALUES (v_run, 'ob-t' || (g / 6 % 3 + 1), 'ob-k' || (g / 18 % 2 + 1),
                                   c_statuses[g % 6 + 1]);
    END LOOP;
    FOR v_claim IN SELECT c.run_id, c.epoch
                     FROM runq.claim(ARRAY[2901, 2902, 2903, 2904], worker_id => 'ob-w',
                                     lease => interval '1 hour', max_runs => 100) AS c LOOP
        UPDATE obruns SET epoch = v_claim.epoch WHERE run_id = v_claim.run_id;
    END LOOP;
    PERFORM runq.ask_user(o.run_id, o.epoch, '{"q": "ob?"}') FROM obruns AS o WHERE o.status = 'waiting_for_user';
    PERFORM runq.complete(o.run_id, o.epoch, jsonb_build_object('n', o.run_id))
       FROM obruns AS o WHERE o.status = 'succeeded';
    PERFORM runq.fail(o.run_id, o.epoch, '{"code": "ob-boom"}') FROM obruns AS o WHERE o.status = 'failed';
    PERFORM runq.cancel(o.run_id, 'ob') FROM obruns AS o WHERE o.status = 'cancelled';
END $$;
-- One running run of ob-t1/ob-k1 began a tool call and recorded usage.
SELECT min(run_id) AS r_tool FROM obruns WHERE status = 'running' AND tenant = 'ob-t1' AND kind = 'ob-k1' \gset
SELECT runq.begin_tool(:r_tool, 1, 'ob-call', 'search', 'read_only', '{"q": "x"}') AS began,
       runq.record_usage(:r_tool, 1, '{"tokens": 7}') AS recorded \gset
SELECT min(run_id) AS r_done FROM obruns WHERE status = 'succeeded' \gset
-- A limit, a pause and a schedule for the views.
SELECT runq.set_limit('tenant', 'ob-t1', 50)::text AS limited, runq.pause('kind', 'ob-paused', 'ob reason') AS paused,
       runq.create_schedule('ob-sched', 'ob-s', 'ob-s', cron => '0 0 1 1 *', priority => 2999) AS scheduled \gset
-- The middle of the fixture, for before_run_id.
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY run_id) AS r_mid FROM obruns \gset

SELECT is((SELECT string_agg(s.status || ' ' || s.n, ', ' ORDER BY s.status)
             FROM (SELECT g.status, count(*) AS n FROM obruns AS o, LATERAL runq.get_run(o.run_id) AS g
                    WHERE g.status = o.status GROUP BY g.status) AS s),
          'cancelled 12, failed 12, queued 12, running 12, succeeded 12, waiting_for_user 12',
          'fixture: 12 runs in each status, as intended');
SELECT ok(:'began' AND :'recorded', 'fixture: a running run began a tool call and recorded usage');
SELECT ok(:'limited' = '' AND :'paused' AND :'scheduled', 'fixture: a limit, a pause and a schedule');

-- ---------------------------------------------------------------------------
-- (a) The catalog: exactly the documented grants, each function read-only
-- ---------------------------------------------------------------------------
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace
                   AND pg_catalog.has_function_privilege('runq_observer', p.oid, 'EXECUTE')
                 ORDER BY 1),
          ARRAY['runq.children(bigint)', 'runq.dead_letter(integer)', 'runq.get_run(bigint)',
                'runq.list_runs(text,text,text,bigint,integer)', 'runq.model_calls(bigint)',
                'runq.orphan_report(interval)', 'runq.read_output(bigint,bigint,integer)',
                'runq.recovery_totals()', 'runq.run_events(bigint)',
                'runq.throughput(timestamp with time zone)', 'runq.tool_calls(bigint)',
                'runq.usage_report(timestamp with time zone,timestamp with time zone)'],
          'runq_observer may execute exactly the documented functions of runq (no internal helper)');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace
                   AND pg_catalog.has_function_privilege('runq_observer', p.oid, 'EXECUTE')
                   AND p.provolatile NOT IN ('s', 'i')
                 ORDER BY 1),
          ARRAY[]::text[], 'every runq function runq_observer may execute is STABLE or IMMUTABLE');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace
                   AND pg_catalog.has_function_privilege(:'obs', p.oid, 'EXECUTE')
                 ORDER BY 1),
          ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace
                   AND pg_catalog.has_function_privilege('runq_observer', p.oid, 'EXECUTE')
                 ORDER BY 1),
          'a member of runq_observer may execute just those');
SELECT is(ARRAY(SELECT c.relname::text || ':' || pr.p FROM pg_catalog.pg_class AS c,
                       unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES',
                                    'TRIGGER']) AS pr(p)
                 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
                   AND pg_catalog.has_table_privilege('runq_observer', c.oid, pr.p)
                 ORDER BY 1),
          ARRAY['limits:SELECT', 'pauses:SELECT', 'queue_stats:SELECT', 'schedules:SELECT'],
          'runq_observer may SELECT the four views and has no other privilege on a runq relation');
SELECT is(ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class AS c
                 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind = 'S'
                   AND CASE WHEN c.relkind = 'S'
                            THEN pg_catalog.has_sequence_privilege('runq_observer', c.oid, 'USAGE, SELECT, UPDATE') END
                 ORDER BY 1),
          ARRAY[]::text[], 'runq_observer may not use, read or set a runq sequence');
SELECT schema_privs_are('runq', 'runq_observer', ARRAY['USAGE'], 'runq_observer has USAGE, not CREATE, on schema runq');
SELECT is((SELECT format('login %s, superuser %s, createrole %s, createdb %s, replication %s, bypassrls %s',
                         r.rolcanlogin::text, r.rolsuper::text, r.rolcreaterole::text, r.rolcreatedb::text,
                         r.rolreplication::text, r.rolbypassrls::text)
             FROM pg_catalog.pg_roles AS r WHERE r.rolname = 'runq_observer'),
          'login false, superuser false, createrole false, createdb false, replication false, bypassrls false',
          'runq_observer is NOLOGIN and holds no role attribute');
SELECT is(ARRAY(SELECT m.roleid::regrole::text FROM pg_catalog.pg_auth_members AS m
                 WHERE m.member = 'runq_observer'::regrole ORDER BY 1),
          ARRAY[]::text[], 'runq_observer is a member of no role');

-- ---------------------------------------------------------------------------
-- (b) From outside: everything else refuses a member of runq_observer (42501)
-- ---------------------------------------------------------------------------
SELECT pg_temp.state() AS state_before \gset
SET ROLE :"obs";

-- Every public function it may not execute, with NULL arguments (27 tests).
SELECT throws_ok(format('SELECT * FROM runq.%I(%s)', p.proname,
                        (SELECT coalesce(string_agg('NULL::' || pg_catalog.format_type(a.t, NULL), ', ' ORDER BY a.n), '')
                           FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, n))),
                 '42501', format('permission denied for function %s', p.proname),
                 format('runq_observer may not call %s (42501)', p.oid::regprocedure))
  FROM pg_catalog.pg_proc AS p
 WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_'
   AND NOT pg_catalog.has_function_privilege('runq_observer', p.oid, 'EXECUTE')
 ORDER BY p.proname;

-- Every table, by every statement (12 tables x 5 = 60 tests).
SELECT throws_ok(format(s.sql, c.relname,
                        (SELECT a.attname FROM pg_catalog.pg_attribute AS a
                          WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                            AND a.attidentity = '' AND a.attgenerated = ''
                          ORDER BY a.attnum LIMIT 1)),
                 '42501', format('permission denied for table %s', c.relname),
                 format('runq_observer may not %s runq.%s (42501)', s.verb, c.relname))
  FROM pg_catalog.pg_class AS c,
       (VALUES ('SELECT', 'SELECT * FROM runq.%1$I'),
               ('INSERT', 'INSERT INTO runq.%1$I DEFAULT VALUES'),
               ('UPDATE', 'UPDATE runq.%1$I SET %2$I = NULL'),
               ('DELETE', 'DELETE FROM runq.%1$I'),
               ('TRUNCATE', 'TRUNCATE runq.%1$I')) AS s(verb, sql)
 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind IN ('r', 'p')
 ORDER BY c.relname, s.verb;

-- Every sequence (3 x 3 = 9 tests).
SELECT throws_ok(format(s.sql, c.relname), '42501', format('permission denied for sequence %s', c.relname),
                 format('runq_observer may not %s runq.%s (42501)', s.verb, c.relname))
  FROM pg_catalog.pg_class AS c,
       (VALUES ('read', 'SELECT * FROM runq.%I'),
               ('advance', 'SELECT nextval(''runq.%I'')'),
               ('set', 'SELECT setval(''runq.%I'', 1)')) AS s(verb, sql)
 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind = 'S'
 ORDER BY c.relname, s.verb;

-- The views: it reads them, and writes into none (4 + 12 tests). queue_stats
-- cannot be written at all (55000); the others are simple enough to be
-- updatable, and refuse it for want of the privilege.
SELECT lives_ok(format('SELECT * FROM runq.%I', v), format('runq_observer may read runq.%s', v))
  FROM unnest(ARRAY['limits', 'pauses', 'queue_stats', 'schedules']) AS v ORDER BY v;
SELECT throws_ok(format(s.sql, v.v, v.col), CASE WHEN v.v = 'queue_stats' THEN '55000' ELSE '42501' END, NULL,
                 format('runq_observer may not %s runq.%s', s.verb, v.v))
  FROM (VALUES ('limits', 'scope'), ('pauses', 'scope'), ('queue_stats', 'priority'), ('schedules', 'cron')) AS v(v, col),
       (VALUES ('INSERT into', 'INSERT INTO runq.%1$I DEFAULT VALUES'),
               ('UPDATE', 'UPDATE runq.%1$I SET %2$I = NULL'),
               ('DELETE from', 'DELETE FROM runq.%1$I')) AS s(verb, sql)
 ORDER BY v.v, s.verb;
SELECT throws_ok('CREATE TABLE runq.ob_mine (a integer)', '42501', 'permission denied for schema runq',
                 'runq_observer may not create in schema runq');
SELECT is(ARRAY(SELECT r.rolname::text FROM pg_catalog.pg_roles AS r
                 WHERE r.rolname ~ '^runq_' AND r.rolname <> current_user
                   AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE')
                 ORDER BY 1),
          ARRAY['runq_observer'], 'of the runq roles, the member holds the rights of runq_observer only');

-- ---------------------------------------------------------------------------
-- (c) What it is granted works for it, and shows the right data
-- ---------------------------------------------------------------------------
RESET ROLE;
CREATE TEMP TABLE want_runs ON COMMIT DROP AS
    SELECT o.run_id, to_jsonb(g) AS row FROM obruns AS o, LATERAL runq.get_run(o.run_id) AS g;
GRANT SELECT ON want_runs TO PUBLIC;
SELECT array_agg(run_id ORDER BY run_id DESC) AS want_t2 FROM runq.runs WHERE tenant_id = 'ob-t2' \gset
SELECT array_agg(run_id ORDER BY run_id DESC) AS want_failed FROM obruns WHERE status = 'failed' \gset
SELECT count(*) FILTER (WHERE type = 'run.fenced') AS want_fenced,
       count(*) FILTER (WHERE type = 'run.requeued') AS want_requeued FROM runq.run_events \gset
SET ROLE :"obs";

SELECT is((SELECT count(*)::int FROM want_runs AS w, LATERAL runq.get_run(w.run_id) AS g WHERE to_jsonb(g) = w.row),
          72, 'get_run: every run as the superuser sees it');
SELECT is((SELECT count(*)::int FROM obruns AS o, LATERAL runq.get_run(o.run_id) AS g
            WHERE (g.tenant_id, g.kind, g.status) = (o.tenant, o.kind, o.status)),
          72, 'get_run: each run''s tenant, kind and status');
SELECT is((SELECT g.question FROM obruns AS o, LATERAL runq.get_run(o.run_id) AS g
            WHERE o.status = 'waiting_for_user' ORDER BY o.run_id LIMIT 1),
          '{"q": "ob?"}'::jsonb, 'get_run: a waiting run''s question');
SELECT is(pg_temp.events(:r_done), ARRAY['run.created@0', 'run.claimed@1', 'run.succeeded@1'],
          'run_events: a succeeded run''s events');
SELECT results_eq(format('SELECT call_id, tool, status, epoch FROM runq.tool_calls(%s)', :r_tool),
                  $$VALUES ('ob-call'::text, 'search'::text, 'started'::text, 1::bigint)$$,
                  'tool_calls: the run''s started call');
SELECT is(ARRAY(SELECT d.run_id FROM runq.dead_letter(1000) AS d WHERE d.tenant_id LIKE 'ob-%'),
          :'want_failed'::bigint[], 'dead_letter: the failed runs, newest first');
SELECT is(ARRAY(SELECT DISTINCT d.failure ->> 'code' FROM runq.dead_letter(1000) AS d WHERE d.tenant_id LIKE 'ob-%'),
          ARRAY['ob-boom'], 'dead_letter: with their failure');
SELECT results_eq($$SELECT stale, did_work, runs FROM runq.orphan_report() WHERE lease_owner = 'ob-w'
                     ORDER BY did_work$$,
                  $$VALUES (false, false, 11::bigint), (false, true, 1::bigint)$$,
                  'orphan_report: the 12 running runs of worker ob-w, one of which did work');
SELECT results_eq($$SELECT tenant_id, kind, runs, usage FROM runq.usage_report(now() - interval '1 hour')
                     WHERE tenant_id LIKE 'ob-%'$$,
                  $$VALUES ('ob-t1'::text, 'ob-k1'::text, 1::bigint, '{"tokens": 7}'::jsonb)$$,
                  'usage_report: the usage recorded');
SELECT is(ARRAY(SELECT l.run_id FROM runq.list_runs(tenant_id => 'ob-t2') AS l),
          :'want_t2'::bigint[], 'list_runs: a tenant''s runs, newest first');
SELECT is((SELECT (t.fenced, t.requeued)::text FROM runq.recovery_totals() AS t),
          (:want_fenced::bigint, :want_requeued::bigint)::text, 'recovery_totals: the events stored');
SELECT lives_ok($$SELECT * FROM runq.throughput(now() - interval '1 hour')$$, 'throughput answers (its data below)');
SELECT results_eq($$SELECT priority, ready, scheduled, running, waiting_for_user, failed FROM runq.queue_stats
                     WHERE priority BETWEEN 2900 AND 2905 ORDER BY priority$$,
                  $$VALUES (2900, 12::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint),
                           (2901, 0, 0, 12, 0, 0), (2902, 0, 0, 0, 12, 0), (2904, 0, 0, 0, 0, 12)$$,
                  'queue_stats: the classes'' queued, running, waiting and failed runs');
SELECT results_eq($$SELECT scope, key, max_running, running FROM runq.limits WHERE key LIKE 'ob-%'$$,
                  $$VALUES ('tenant'::text, 'ob-t1'::text, 50, 4::bigint)$$,
                  'limits: the tenant''s limit and its running runs');
SELECT results_eq($$SELECT scope, key, reason FROM runq.pauses WHERE key LIKE 'ob-%'$$,
                  $$VALUES ('kind'::text, 'ob-paused'::text, 'ob reason'::text)$$, 'pauses: the pause');
SELECT results_eq($$SELECT name, tenant_id, kind, cron, paused FROM runq.schedules WHERE name LIKE 'ob-%'$$,
                  $$VALUES ('ob-sched'::text, 'ob-s'::text, 'ob-s'::text, '0 0 1 1 *'::text, false)$$,
                  'schedules: the schedule');
RESET ROLE;
SELECT is(pg_temp.state(), :'state_before', 'all the observer did and tried left every table and sequence as it was');

-- ---------------------------------------------------------------------------
-- list_runs: every combination of filters equals the naive query
-- ---------------------------------------------------------------------------
-- The naive answer: the runs that match, newest first, max_runs of them.
CREATE FUNCTION pg_temp.naive(p_status text, p_tenant text, p_kind text, p_before bigint, p_max integer)
    RETURNS bigint[] LANGUAGE sql AS $$
    SELECT ARRAY(SELECT r.run_id FROM runq.runs AS r
                  WHERE (p_status IS NULL OR r.status = p_status) AND (p_tenant IS NULL OR r.tenant_id = p_tenant)
                    AND (p_kind IS NULL OR r.kind = p_kind) AND (p_before IS NULL OR r.run_id < p_before)
                  ORDER BY r.run_id DESC LIMIT p_max)
$$;
-- list_runs' rows, in its order, as jsonb (p_max NULL: its default).
CREATE FUNCTION pg_temp.listed(p_status text, p_tenant text, p_kind text, p_before bigint, p_max integer)
    RETURNS jsonb LANGUAGE sql AS $$
    SELECT CASE WHEN p_max IS NOT NULL THEN
        (SELECT coalesce(jsonb_agg(to_jsonb(l) - 'ordinality' ORDER BY l.ordinality), '[]')
           FROM runq.list_runs(p_status, p_tenant, p_kind, p_before, p_max) WITH ORDINALITY AS l)
    ELSE
        (SELECT coalesce(jsonb_agg(to_jsonb(l) - 'ordinality' ORDER BY l.ordinality), '[]')
           FROM runq.list_runs(p_status, p_tenant, p_kind, p_before) WITH ORDINALITY AS l)
    END
$$;
-- get_run's rows of the naive answer, as jsonb.
CREATE FUNCTION pg_temp.wanted(p_status text, p_tenant text, p_kind text, p_before bigint, p_max integer)
    RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(to_jsonb(g) ORDER BY i.n), '[]')
      FROM unnest(pg_temp.naive(p_status, p_tenant, p_kind, p_before, coalesce(p_max, 50))) WITH ORDINALITY AS i(id, n),
           LATERAL runq.get_run(i.id) AS g
$$;
-- Every combination: 7 statuses (NULL too) x 5 tenants x 4 kinds x 2
-- before_run_ids x 4 max_runs (NULL: the default 50).
CREATE TEMP TABLE combos ON COMMIT DROP AS
    SELECT s, t, k, b, m, pg_temp.listed(s, t, k, b, m) AS got, pg_temp.wanted(s, t, k, b, m) AS want
      FROM unnest(ARRAY[NULL, 'queued', 'running', 'waiting_for_user', 'succeeded', 'failed', 'cancelled']) AS s,
           unnest(ARRAY[NULL, 'ob-t1', 'ob-t2', 'ob-t3', 'ob-none']) AS t,
           unnest(ARRAY[NULL, 'ob-k1', 'ob-k2', 'ob-none']) AS k,
           unnest(ARRAY[NULL, :r_mid]::bigint[]) AS b,
           unnest(ARRAY[1, 3, NULL, 1000]) AS m;
SELECT is(ARRAY(SELECT format('status %s, tenant %s, kind %s, before %s, max_runs %s',
                              coalesce(s, '-'), coalesce(t, '-'), coalesce(k, '-'), coalesce(b::text, '-'),
                              coalesce(m::text, '-'))
                  FROM combos
                 WHERE (s IS NOT NULL, t IS NOT NULL, k IS NOT NULL) = (f.s, f.t, f.k) AND got IS DISTINCT FROM want
                 ORDER BY 1),
          ARRAY[]::text[],
          format('list_runs filtered by %s: the runs and columns of get_run, newest first, as the naive query',
                 f.label))
  FROM (VALUES (false, false, false, 'nothing'), (true, false, false, 'status'), (false, true, false, 'tenant'),
               (false, false, true, 'kind'), (true, true, false, 'status and tenant'),
               (true, false, true, 'status and kind'), (false, true, true, 'tenant and kind'),
               (true, true, true, 'status, tenant and kind')) AS f(s, t, k, label);
SELECT is((SELECT count(*)::int FROM combos WHERE t IN ('ob-t1', 'ob-t2', 'ob-t3') AND k IN ('ob-k1', 'ob-k2')
              AND s IS NOT NULL AND b IS NULL AND m = 1000 AND jsonb_array_length(want) = 2),
          36, 'the comparison is not vacuous: each status, tenant and kind has its two runs');
SELECT is((SELECT sum(jsonb_array_length(got))::int FROM combos WHERE t LIKE 'ob-t_' AND k IS NULL AND s IS NULL
              AND b IS NULL AND m = 1000),
          72, '... and the three tenants hold the 72 runs');

-- By hand: newest first, max_runs, before_run_id.
SELECT is(ARRAY(SELECT l.run_id FROM runq.list_runs('queued', 'ob-t1', 'ob-k1') AS l),
          ARRAY(SELECT run_id FROM obruns WHERE (status, tenant, kind) = ('queued', 'ob-t1', 'ob-k1')
                 ORDER BY run_id DESC),
          'the two queued runs of ob-t1/ob-k1, newest first');
SELECT is(ARRAY(SELECT l.run_id FROM runq.list_runs(tenant_id => 'ob-t3', max_runs => 5) AS l),
          ARRAY(SELECT run_id FROM obruns WHERE tenant = 'ob-t3' ORDER BY run_id DESC LIMIT 5),
          'max_runs 5: the newest five of a tenant''s 24');
SELECT is((SELECT count(*)::int FROM runq.list_runs(max_runs => 1)), 1, 'max_runs 1: one run');
SELECT is((SELECT count(*)::int FROM runq.list_runs(tenant_id => 'ob-t1')), 24,
          'the default max_runs (50) returns all 24 of a tenant');
SELECT is((SELECT count(*)::int FROM runq.list_runs(max_runs => 30)), 30, 'max_runs 30 unfiltered: 30 runs');
SELECT is(ARRAY(SELECT l.run_id FROM runq.list_runs(tenant_id => 'ob-t2', before_run_id => :r_mid) AS l),
          ARRAY(SELECT run_id FROM obruns WHERE tenant = 'ob-t2' AND run_id < :r_mid ORDER BY run_id DESC),
          'before_run_id: only older runs (strictly)');
SELECT is((SELECT count(*)::int FROM runq.list_runs(tenant_id => 'ob-t1',
                                                    before_run_id => (SELECT min(run_id) FROM obruns))),
          0, 'before the oldest run: nothing');
SELECT is((SELECT count(*)::int FROM runq.list_runs(before_run_id => -1)), 0, 'before a negative id: nothing');
SELECT is((SELECT count(*)::int FROM runq.list_runs('running', 'ob-none')), 0, 'an unknown tenant: nothing');

-- ---------------------------------------------------------------------------
-- Keyset paging: before_run_id = the last run of the page walks every run once
-- ---------------------------------------------------------------------------
CREATE FUNCTION pg_temp.walk(p_status text, p_tenant text, p_kind text, p_page integer) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_all bigint[] := '{}';
    v_page bigint[];
    v_before bigint;
BEGIN
    LOOP
        v_page := ARRAY(SELECT l.run_id FROM runq.list_runs(p_status, p_tenant, p_kind, v_before, p_page) AS l);
        v_all := v_all || v_page;
        EXIT WHEN cardinality(v_page) < p_page;
        v_before := v_page[p_page];
    END LOOP;
    RETURN v_all;
END $$;
SELECT is(pg_temp.walk(w.s, w.t, w.k, w.page), pg_temp.naive(w.s, w.t, w.k, NULL, 1000000),
          format('pages of %s walk %s: every run once, newest first', w.page, w.label))
  FROM (VALUES (NULL, NULL, NULL, 7, 'all runs'), ('failed', NULL, NULL, 5, 'a status'),
               ('running', NULL, NULL, 5, 'the running runs'), (NULL, 'ob-t1', NULL, 4, 'a tenant'),
               (NULL, NULL, 'ob-k2', 3, 'a kind'), ('queued', 'ob-t2', NULL, 1, 'a status of a tenant'),
               ('cancelled', NULL, 'ob-k1', 2, 'a status of a kind'), (NULL, 'ob-t3', 'ob-k1', 5, 'a tenant''s kind'),
               ('succeeded', 'ob-t1', 'ob-k2', 1, 'one key'), (NULL, 'ob-t2', NULL, 24, 'a tenant in one full page'))
       AS w(s, t, k, page, label);

-- ---------------------------------------------------------------------------
-- list_runs' errors: 22023 naming the value, nothing changed
-- ---------------------------------------------------------------------------
SELECT pg_temp.state() AS state_before \gset
SET ROLE :"obs";
SELECT throws_ok($$SELECT * FROM runq.list_runs('bogus')$$, '22023',
                 'status must be one of queued, running, waiting_for_user, waiting_for_children, succeeded, failed, cancelled, got ''bogus''',
                 'an unknown status is 22023 naming it');
SELECT throws_ok($$SELECT * FROM runq.list_runs('RUNNING')$$, '22023',
                 'status must be one of queued, running, waiting_for_user, waiting_for_children, succeeded, failed, cancelled, got ''RUNNING''',
                 'statuses are lower case');
SELECT throws_ok($$SELECT * FROM runq.list_runs('')$$, '22023',
                 'status must be one of queued, running, waiting_for_user, waiting_for_children, succeeded, failed, cancelled, got ''''',
                 'an empty status is 22023');
SELECT throws_ok($$SELECT * FROM runq.list_runs(tenant_id => '')$$, '22023',
                 'tenant_id must be NULL or 1 to 256 characters, got ''''', 'an empty tenant_id is 22023');
SELECT throws_ok(format('SELECT * FROM runq.list_runs(tenant_id => %L)', repeat('t', 257)), '22023',
                 format('tenant_id must be NULL or 1 to 256 characters, got %L', repeat('t', 100)),
                 'a tenant_id of 257 characters is 22023, its first 100 shown');
SELECT throws_ok($$SELECT * FROM runq.list_runs(kind => '')$$, '22023',
                 'kind must be NULL or 1 to 256 characters, got ''''', 'an empty kind is 22023');
SELECT throws_ok(format('SELECT * FROM runq.list_runs(kind => %L)', repeat('k', 257)), '22023',
                 format('kind must be NULL or 1 to 256 characters, got %L', repeat('k', 100)),
                 'a kind of 257 characters is 22023');
SELECT throws_ok($$SELECT * FROM runq.list_runs(max_runs => 0)$$, '22023', 'max_runs must be at least 1, got 0',
                 'max_runs 0 is 22023');
SELECT throws_ok($$SELECT * FROM runq.list_runs(max_runs => -3)$$, '22023', 'max_runs must be at least 1, got -3',
                 'a negative max_runs is 22023');
SELECT throws_ok($$SELECT * FROM runq.list_runs(max_runs => NULL)$$, '22023', 'max_runs must be at least 1, got NULL',
                 'a NULL max_runs is 22023');
SELECT throws_ok($$SELECT * FROM runq.list_runs('queued', 'ob-t1', 'ob-k1', NULL, 0)$$, '22023',
                 'max_runs must be at least 1, got 0', 'with every filter valid, max_runs 0 is still 22023');
SELECT lives_ok(format('SELECT * FROM runq.list_runs(tenant_id => %L, kind => %L)', repeat('t', 256), repeat('k', 256)),
                'a tenant_id and a kind of 256 characters are accepted');
RESET ROLE;
SELECT is(pg_temp.state(), :'state_before', 'the rejected calls changed nothing');

-- ---------------------------------------------------------------------------
-- throughput: per UTC minute, started = run.claimed, finished = run.succeeded,
-- run.failed, run.cancelled
-- ---------------------------------------------------------------------------
-- Four runs of tenant ob-tp: p1 claimed and succeeded, p2 claimed and failed,
-- p3 cancelled while queued, p4 claimed, worked, released, claimed again and
-- waiting. Their events are then moved (fixture) to minutes of 2090, where
-- nothing else is: minute 0 three claims, minute 1 a success and a cancel
-- (and events that do not count), minute 2 nothing, minute 3 a failure and a
-- claim, minute 4 and 5 only events that do not count.
SELECT s.run_id AS p1 FROM runq.submit(tenant_id => 'ob-tp', kind => 'ob-k1', priority => 2906) AS s \gset
SELECT s.run_id AS p2 FROM runq.submit(tenant_id => 'ob-tp', kind => 'ob-k1', priority => 2907) AS s \gset
SELECT s.run_id AS p3 FROM runq.submit(tenant_id => 'ob-tp', kind => 'ob-k1', priority => 2908) AS s \gset
SELECT s.run_id AS p4 FROM runq.submit(tenant_id => 'ob-tp', kind => 'ob-k1', priority => 2909) AS s \gset
SELECT count(*) AS claimed FROM runq.claim(ARRAY[2906, 2907, 2909], worker_id => 'ob-tp', max_runs => 3) \gset
SELECT runq.complete(:p1, 1) AS p1_done, runq.fail(:p2, 1, '{"code": "ob-tp"}') AS p2_failed,
       runq.cancel(:p3) AS p3_cancelled, runq.checkpoint(:p4, 1, '{"s": 1}') AS p4_cp,
       runq.begin_turn(:p4, 1) AS p4_turn, runq.record_usage(:p4, 1, '{"tokens": 1}') AS p4_usage,
       runq.release(:p4, 1) AS p4_released \gset
SELECT count(*) AS claimed2 FROM runq.claim(ARRAY[2909], worker_id => 'ob-tp') \gset
SELECT runq.ask_user(:p4, 2, '{"q": 1}') AS p4_asked \gset
SELECT is((:claimed + :claimed2)::int, 4, 'fixture: four claims');
SELECT ok(:'p1_done' AND :'p2_failed' AND :'p3_cancelled' = 'cancelled' AND :'p4_cp' AND :'p4_turn' AND :'p4_usage'
          AND :'p4_released' AND :'p4_asked', 'fixture: every call applied');
SELECT is(pg_temp.events(:p4), ARRAY['run.created@0', 'run.claimed@1', 'run.checkpointed@1', 'run.turn_started@1',
                                     'run.usage@1', 'run.requeued@1', 'run.claimed@2', 'run.waiting_for_user@2'],
          'fixture: p4''s events');
UPDATE runq.run_events AS e
   SET created_at = timestamptz '2090-01-01 00:00:00+00' + m.at
  FROM (SELECT x.event_id, x.run_id, x.type, row_number() OVER (PARTITION BY x.run_id, x.type ORDER BY x.event_id) AS n
          FROM runq.run_events AS x WHERE x.run_id IN (:p1, :p2, :p3, :p4)) AS o,
       (VALUES (:p1, 'run.claimed', 1, interval '10 seconds'), (:p2, 'run.claimed', 1, '40 seconds'),
               (:p4, 'run.claimed', 1, '59.999 seconds'),
               (:p1, 'run.succeeded', 1, '1 minute'), (:p3, 'run.cancelled', 1, '1 minute 30 seconds'),
               (:p4, 'run.checkpointed', 1, '1 minute 20 seconds'), (:p4, 'run.turn_started', 1, '1 minute 21 seconds'),
               (:p4, 'run.usage', 1, '1 minute 22 seconds'),
               (:p2, 'run.failed', 1, '3 minutes 5 seconds'), (:p4, 'run.claimed', 2, '3 minutes 59.5 seconds'),
               (:p4, 'run.requeued', 1, '4 minutes'), (:p4, 'run.waiting_for_user', 1, '4 minutes 10 seconds'),
               (:p1, 'run.created', 1, '5 minutes'), (:p2, 'run.created', 1, '5 minutes'),
               (:p3, 'run.created', 1, '5 minutes'), (:p4, 'run.created', 1, '5 minutes')) AS m(run_id, type, n, at)
 WHERE e.event_id = o.event_id AND (o.run_id, o.type, o.n) = (m.run_id::bigint, m.type, m.n);  -- fixture
SELECT is((SELECT count(*)::int FROM runq.run_events WHERE created_at >= '2090-01-01'), 16,
          'fixture: 16 events moved to 2090');

SET ROLE :"obs";
SELECT results_eq($$SELECT * FROM runq.throughput('2090-01-01 00:00:00+00')$$,
                  $$VALUES ('2090-01-01 00:00:00+00'::timestamptz, 3::bigint, 0::bigint),
                           ('2090-01-01 00:01:00+00', 0, 2), ('2090-01-01 00:03:00+00', 1, 1)$$,
                  'per minute: claims started, successes, failures and cancels finished; nothing else counts, empty minutes absent');
SELECT results_eq($$SELECT * FROM runq.throughput('2090-01-01 00:00:40+00')$$,
                  $$VALUES ('2090-01-01 00:00:00+00'::timestamptz, 2::bigint, 0::bigint),
                           ('2090-01-01 00:01:00+00', 0, 2), ('2090-01-01 00:03:00+00', 1, 1)$$,
                  'since is inclusive, and a minute begun before since is labelled by its start');
SELECT results_eq($$SELECT * FROM runq.throughput('2090-01-01 00:01:00.000001+00')$$,
                  $$VALUES ('2090-01-01 00:01:00+00'::timestamptz, 0::bigint, 1::bigint),
                           ('2090-01-01 00:03:00+00', 1, 1)$$,
                  'an event before since does not count');
SELECT is((SELECT count(*)::int FROM runq.throughput('2090-01-01 00:04:00+00')), 0,
          'minutes of events that do not count are absent');
SET LOCAL TimeZone = 'Asia/Kathmandu';
SELECT results_eq($$SELECT * FROM runq.throughput('2090-01-01 05:45:00+05:45')$$,
                  $$VALUES ('2090-01-01 00:00:00+00'::timestamptz, 3::bigint, 0::bigint),
                           ('2090-01-01 00:01:00+00', 0, 2), ('2090-01-01 00:03:00+00', 1, 1)$$,
                  'the minutes are the same in a session of another time zone');
RESET TimeZone;
SELECT throws_ok($$SELECT * FROM runq.throughput(NULL)$$, '22023', 'since must be a finite time, got NULL',
                 'a NULL since is 22023');
SELECT throws_ok($$SELECT * FROM runq.throughput('infinity')$$, '22023', 'since must be a finite time, got infinity',
                 'since infinity is 22023');
SELECT throws_ok($$SELECT * FROM runq.throughput('-infinity')$$, '22023', 'since must be a finite time, got -infinity',
                 'since -infinity is 22023');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- recovery_totals: one more run.requeued per expired lease the sweep puts
-- back, one more run.fenced per stale epoch
-- ---------------------------------------------------------------------------
-- The totals as runq_observer reads them: 'fenced requeued'.
CREATE FUNCTION pg_temp.totals() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', 'runq_pgtap_observer_' || pg_backend_pid());
    SELECT t.fenced || ' ' || t.requeued INTO v FROM runq.recovery_totals() AS t;
    RESET ROLE;
    RETURN v;
END $$;
SELECT split_part(pg_temp.totals(), ' ', 1)::bigint AS f0, split_part(pg_temp.totals(), ' ', 2)::bigint AS q0 \gset
-- A zero_work run that did nothing is requeued at once by the sweep.
SELECT s.run_id AS x FROM runq.submit(tenant_id => 'ob-rc', kind => 'ob-k1', priority => 2910,
                                      recovery_policy => 'zero_work') AS s \gset
SELECT epoch AS x_epoch FROM runq.claim(ARRAY[2910], worker_id => 'ob-rc', lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:x || ':requeued'], 'the sweep requeues the expired lease');
SELECT is(pg_temp.totals(), :f0 || ' ' || (:q0 + 1), 'requeued is up by one, fenced unchanged');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[2910], worker_id => 'ob-rc', lease => interval '1 hour')), 1,
          'the run is claimed again, under epoch 2');
SELECT is(runq.heartbeat(:x, :x_epoch), false, 'a heartbeat under the stale epoch 1 is fenced');
SELECT is(pg_temp.totals(), (:f0 + 1) || ' ' || (:q0 + 1), 'fenced is up by one, requeued unchanged');
SELECT ok(NOT runq.heartbeat(:x, :x_epoch) AND NOT runq.complete(:x, :x_epoch), 'the stale epoch stays fenced');
SELECT is(pg_temp.totals(), (:f0 + 1) || ' ' || (:q0 + 1), 'a stale epoch is counted once, however often it calls');
SELECT is(pg_temp.totals(), (SELECT count(*) FILTER (WHERE type = 'run.fenced') || ' '
                                    || count(*) FILTER (WHERE type = 'run.requeued' AND payload ->> 'reason' = 'lease_expired')
                                 FROM runq.run_events),
          'the totals are the run.fenced events and the run.requeued events of an expired lease stored');
-- A release gives the lease back: no lease expired, no failure detected. The
-- COMMENT counts "how often an expired lease put a run back in the queue".
SELECT s.run_id AS y FROM runq.submit(tenant_id => 'ob-rc', kind => 'ob-k1', priority => 2911) AS s \gset
SELECT epoch AS y_epoch FROM runq.claim(ARRAY[2911], worker_id => 'ob-rc') \gset
SELECT is(runq.release(:y, :y_epoch), true, 'a worker releases its run');
SELECT is(pg_temp.totals(), (:f0 + 1) || ' ' || (:q0 + 1),
          'a release is no expired lease: requeued unchanged');

-- ---------------------------------------------------------------------------
-- Buffers: a list_runs call reads index ranges, whatever else is stored
-- ---------------------------------------------------------------------------
\ir helpers/buffers.sql
CREATE TEMP TABLE calls (n integer, label text, sql text, few bigint, many bigint) ON COMMIT DROP;
INSERT INTO calls (n, label, sql) VALUES
    (1, 'unfiltered', 'SELECT * FROM runq.list_runs(max_runs => 2)'),
    (2, 'queued', $$SELECT * FROM runq.list_runs('queued', max_runs => 2)$$),
    (3, 'running', $$SELECT * FROM runq.list_runs('running', max_runs => 2)$$),
    (4, 'succeeded', $$SELECT * FROM runq.list_runs('succeeded', max_runs => 2)$$),
    (5, 'a tenant', $$SELECT * FROM runq.list_runs(tenant_id => 'ob-t1', max_runs => 2)$$),
    (6, 'a kind', $$SELECT * FROM runq.list_runs(kind => 'ob-k1', max_runs => 2)$$),
    (7, 'a tenant''s kind', $$SELECT * FROM runq.list_runs(tenant_id => 'ob-t1', kind => 'ob-k1', max_runs => 2)$$),
    (8, 'a tenant''s queued runs', $$SELECT * FROM runq.list_runs('queued', 'ob-t1', max_runs => 2)$$),
    (9, 'a kind''s waiting runs', $$SELECT * FROM runq.list_runs('waiting_for_user', kind => 'ob-k1', max_runs => 2)$$),
    (10, 'one key', $$SELECT * FROM runq.list_runs('queued', 'ob-t1', 'ob-k1', max_runs => 2)$$),
    (11, 'a tenant''s running runs', $$SELECT * FROM runq.list_runs('running', 'ob-t1', max_runs => 2)$$);
-- Warm the plan caches, and mark dead any index entry an earlier run of this
-- file (or another file) left behind, as a live database's vacuum would.
ANALYZE runq.runs;
SELECT count(pg_temp.call_buffers(sql)) FROM calls, generate_series(1, 2);
UPDATE calls SET few = pg_temp.call_buffers(sql);
-- 200,000 more runs, newer than all above, of the same kinds and of three
-- other tenants, written straight into the table: a backlog of 95,000
-- queued runs, a history of 95,000 succeeded ones, and 10,000 waiting for
-- their user. A call that walked the runs newest first, or one status past
-- another, or the waiting runs for the running ones, would read through them.
INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind, status, finished_at, question)
SELECT now(), now(), 2950, 'ob-bulk' || (g % 3), 'ob-k' || (g % 2 + 1), st,
       CASE WHEN st = 'succeeded' THEN now() END, CASE WHEN st = 'waiting_for_user' THEN '{"q": 1}'::jsonb END
  FROM generate_series(1, 200000) AS g,
       LATERAL (SELECT CASE WHEN g % 20 = 1 THEN 'waiting_for_user' WHEN g / 2 % 2 = 0 THEN 'queued'
                            ELSE 'succeeded' END AS st) AS x;  -- fixture
ANALYZE runq.runs;
SELECT count(pg_temp.call_buffers(sql)) FROM calls, generate_series(1, 2);  -- re-plan after ANALYZE
UPDATE calls SET many = pg_temp.call_buffers(sql);
-- The +30 allows for deeper B-trees (a level more in each of the indexes a
-- call descends, once per range it reads). A walk over the new runs would
-- read thousands.
SELECT cmp_ok(many, '<=', few + 30, format('list_runs, %s: no more buffers with 200,000 more runs stored (%s, was %s)',
                                           label, many, few))
  FROM calls ORDER BY n;
SELECT diag('buffers per list_runs call (max_runs 2), before/after 200,000 more runs: '
            || string_agg(format('%s %s/%s', label, few, many), ', ' ORDER BY n))
  FROM calls;

-- throughput reads the window's block ranges (BRIN), recovery_totals two
-- partial indexes, however long the event log. brin_summarize_new_values
-- does what VACUUM does in a live database: a range not yet summarised is
-- read whole.
SELECT brin_summarize_new_values('runq.run_events_created_idx') >= 0 AS summarized \gset
SELECT pg_temp.call_buffers($$SELECT * FROM runq.throughput('2090-01-01')$$) AS tp_warm,
       pg_temp.call_buffers('SELECT * FROM runq.recovery_totals()') AS rt_warm \gset
SELECT pg_temp.call_buffers($$SELECT * FROM runq.throughput('2090-01-01')$$) AS tp_few,
       pg_temp.call_buffers('SELECT * FROM runq.recovery_totals()') AS rt_few \gset
INSERT INTO runq.run_events (run_id, epoch, type, created_at)
SELECT :p1, 1, 'run.checkpointed', now() - interval '1 day' + g * interval '1 millisecond'
  FROM generate_series(1, 200000) AS g;  -- fixture
SELECT brin_summarize_new_values('runq.run_events_created_idx') >= 0 AS summarized \gset
ANALYZE runq.run_events;
SELECT pg_temp.call_buffers($$SELECT * FROM runq.throughput('2090-01-01')$$) AS tp_warm,
       pg_temp.call_buffers('SELECT * FROM runq.recovery_totals()') AS rt_warm \gset
SELECT pg_temp.call_buffers($$SELECT * FROM runq.throughput('2090-01-01')$$) AS tp_many,
       pg_temp.call_buffers('SELECT * FROM runq.recovery_totals()') AS rt_many \gset
-- +80: the block range (32 pages) the new events' tail has not filled, and
-- the range the moved events share with the new ones, may be read whole.
SELECT cmp_ok(:tp_many::bigint, '<=', :tp_few::bigint + 80,
              format('throughput reads no more with 200,000 older events stored (%s, was %s)', :tp_many, :tp_few));
SELECT cmp_ok(:rt_many::bigint, '<=', :rt_few::bigint + 10,
              format('recovery_totals reads no more with 200,000 more events stored (%s, was %s)', :rt_many, :rt_few));
SELECT results_eq($$SELECT * FROM runq.throughput('2090-01-01 00:00:00+00')$$,
                  $$VALUES ('2090-01-01 00:00:00+00'::timestamptz, 3::bigint, 0::bigint),
                           ('2090-01-01 00:01:00+00', 0, 2), ('2090-01-01 00:03:00+00', 1, 1)$$,
                  'throughput still finds the window''s events through the summarised ranges');

SELECT * FROM finish();
ROLLBACK;
