-- Privileges: PUBLIC executes nothing; each role executes exactly
-- its functions of the contract; helpers (leading '_') are granted to no one;
-- no role reaches a table directly, only through the SECURITY DEFINER
-- functions, each with a pinned search_path. Tested from the catalog and from
-- outside, under SET ROLE. Classes 1700..1799.
BEGIN;
SELECT plan(381);

CREATE TEMP TABLE grants (fn name, argtypes name[], client boolean, worker boolean) ON COMMIT DROP;
GRANT SELECT ON grants TO PUBLIC;
INSERT INTO grants VALUES
    ('submit', ARRAY['text', 'text', 'jsonb', 'text', 'integer', 'text', 'text', 'timestamp with time zone',
                     'integer', 'text', 'interval', 'jsonb', 'interval'], true, false),
    ('deliver_input', ARRAY['bigint', 'jsonb'],                        true,  false),
    ('cancel',        ARRAY['bigint', 'text'],                         true,  false),
    ('get_run',       ARRAY['bigint'],                                 true,  true),
    ('run_events',    ARRAY['bigint'],                                 true,  true),
    ('claim',         ARRAY['integer[]', 'text', 'interval', 'integer', 'text[]'], false, true),
    ('heartbeat',     ARRAY['bigint', 'bigint'],                       false, true),
    ('complete',      ARRAY['bigint', 'bigint', 'jsonb'],              false, true),
    ('heartbeat_many', ARRAY['bigint[]', 'bigint[]'],                  false, true),
    ('complete_many', ARRAY['bigint[]', 'bigint[]', 'jsonb[]'],        false, true),
    ('complete_and_claim', ARRAY['bigint', 'bigint', 'jsonb', 'integer[]', 'text', 'interval', 'integer',
                                 'text[]', 'boolean'],                   false, true),
    ('fail',          ARRAY['bigint', 'bigint', 'jsonb'],              false, true),
    ('release',       ARRAY['bigint', 'bigint'],                       false, true),
    ('ask_user',      ARRAY['bigint', 'bigint', 'jsonb'],              false, true),
    ('checkpoint',    ARRAY['bigint', 'bigint', 'jsonb'],              false, true),
    ('begin_turn',    ARRAY['bigint', 'bigint'],                       false, true),
    ('begin_tool',    ARRAY['bigint', 'bigint', 'text', 'text', 'text', 'jsonb'], false, true),
    ('end_tool',      ARRAY['bigint', 'bigint', 'text', 'jsonb'],      false, true),
    ('record_usage',  ARRAY['bigint', 'bigint', 'jsonb'],              false, true),
    ('tool_calls',    ARRAY['bigint'],                                 false, true),
    ('sweep',         ARRAY['integer'],                                false, true),
    ('redrive',       ARRAY['bigint', 'text'],                         false, false),
    ('orphan_report', ARRAY['interval'],                               false, false),
    ('dead_letter',   ARRAY['integer'],                                false, false),
    ('purge',         ARRAY['interval', 'integer', 'boolean'],         false, false),
    ('set_limit',     ARRAY['text', 'text', 'integer'],                false, false),
    ('pause',         ARRAY['text', 'text', 'text'],                   false, false),
    ('resume',        ARRAY['text', 'text'],                           false, false),
    ('set_budget',    ARRAY['bigint', 'jsonb'],                        false, false),
    ('usage_report',  ARRAY['timestamp with time zone', 'timestamp with time zone'], false, false);

-- ---------------------------------------------------------------------------
-- Functions: the catalog (30 x 4 = 120 tests)
-- ---------------------------------------------------------------------------
SELECT function_privs_are('runq', fn, argtypes, 'public', ARRAY[]::text[],
                          format('PUBLIC cannot execute runq.%s', fn))
  FROM grants ORDER BY fn;
SELECT function_privs_are('runq', fn, argtypes, 'runq_client',
                          CASE WHEN client THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END,
                          format('runq_client %s execute runq.%s', CASE WHEN client THEN 'can' ELSE 'cannot' END, fn))
  FROM grants ORDER BY fn;
SELECT function_privs_are('runq', fn, argtypes, 'runq_worker',
                          CASE WHEN worker THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END,
                          format('runq_worker %s execute runq.%s', CASE WHEN worker THEN 'can' ELSE 'cannot' END, fn))
  FROM grants ORDER BY fn;
SELECT function_privs_are('runq', fn, argtypes, 'runq_admin', ARRAY['EXECUTE'],
                          format('runq_admin can execute runq.%s', fn))
  FROM grants ORDER BY fn;

-- Every function in the schema, whatever it is.
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace
                   AND pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE')
                 ORDER BY 1),
          ARRAY[]::text[], 'PUBLIC can execute no function in runq');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text || ' by ' || r.rolname FROM pg_catalog.pg_proc AS p,
                       pg_catalog.pg_roles AS r
                 WHERE p.pronamespace = 'runq'::regnamespace AND p.proname ~ '^_'
                   AND r.rolname IN ('runq_client', 'runq_worker', 'runq_admin')
                   AND pg_catalog.has_function_privilege(r.oid, p.oid, 'EXECUTE')
                 ORDER BY 1),
          ARRAY[]::text[], 'no role can execute an internal helper');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace
                   AND NOT EXISTS (SELECT FROM unnest(p.proconfig) AS cfg
                                    WHERE cfg LIKE 'search_path=%' AND cfg LIKE '%pg_temp'
                                      AND cfg NOT LIKE '%public%' AND cfg NOT LIKE '%$user%')
                   -- A SQL-standard body is parsed at creation: no search_path reaches it.
                   AND NOT (p.prosqlbody IS NOT NULL AND NOT p.prosecdef AND p.proname ~ '^_')
                 ORDER BY 1),
          ARRAY[]::text[], 'every runq function pins search_path (pg_temp last, no public), but for internal SQL-standard bodies');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_' AND NOT p.prosecdef
                 ORDER BY 1),
          ARRAY[]::text[], 'every public runq function is SECURITY DEFINER');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p
                 WHERE p.pronamespace = 'runq'::regnamespace AND p.proname !~ '^_'
                   AND NOT pg_catalog.has_function_privilege('runq_admin', p.oid, 'EXECUTE')
                 ORDER BY 1),
          ARRAY[]::text[], 'runq_admin can execute every public runq function');

-- ---------------------------------------------------------------------------
-- Schema, tables, sequences, the views: the catalog
-- ---------------------------------------------------------------------------
SELECT ok(NOT has_schema_privilege('public', 'runq', 'USAGE'), 'PUBLIC has no USAGE on schema runq');
SELECT schema_privs_are('runq', r, ARRAY['USAGE'], r || ' has USAGE, not CREATE, on schema runq')
  FROM unnest(ARRAY['runq_client', 'runq_worker', 'runq_admin']) AS r;

-- 10 tables x 4 grantees = 40 tests.
SELECT table_privs_are('runq', t, r, ARRAY[]::text[], format('%s has no privilege on runq.%s', r, t))
  FROM unnest(ARRAY['settings', 'runs', 'run_events', 'idempotency_keys', 'checkpoints', 'inputs',
                    'tool_calls', 'limit_settings', 'limit_debts', 'pause_settings']) AS t,
       unnest(ARRAY['public', 'runq_client', 'runq_worker', 'runq_admin']) AS r
 ORDER BY t, r;
SELECT is(ARRAY(SELECT c.relname::text || ' by ' || r FROM pg_catalog.pg_class AS c,
                       unnest(ARRAY['public', 'runq_client', 'runq_worker', 'runq_admin']) AS r
                 WHERE c.relnamespace = 'runq'::regnamespace AND c.relkind = 'S'
                   AND pg_catalog.has_sequence_privilege(r, c.oid, 'USAGE, SELECT, UPDATE')
                 ORDER BY 1),
          ARRAY[]::text[], 'no role can use, read or set a runq sequence');
SELECT table_privs_are('runq', 'queue_stats', 'runq_admin', ARRAY['SELECT'],
                       'runq_admin can only SELECT runq.queue_stats');
SELECT table_privs_are('runq', 'queue_stats', r, ARRAY[]::text[], r || ' has no privilege on runq.queue_stats')
  FROM unnest(ARRAY['public', 'runq_client', 'runq_worker']) AS r;
-- The views of the limits and the pauses: likewise (2 + 6 tests).
SELECT table_privs_are('runq', v, 'runq_admin', ARRAY['SELECT'], format('runq_admin can only SELECT runq.%s', v))
  FROM unnest(ARRAY['limits', 'pauses']) AS v;
SELECT table_privs_are('runq', v, r, ARRAY[]::text[], format('%s has no privilege on runq.%s', r, v))
  FROM unnest(ARRAY['limits', 'pauses']) AS v, unnest(ARRAY['public', 'runq_client', 'runq_worker']) AS r
 ORDER BY v, r;

-- ---------------------------------------------------------------------------
-- From outside: runq_client
-- ---------------------------------------------------------------------------
SET ROLE runq_client;
SELECT results_eq($$SELECT outcome FROM runq.submit(tenant_id => 'priv', kind => 'k', session_id => 'priv-s1', priority => 1700)$$,
                  $$VALUES ('created'::text)$$, 'runq_client can submit');
SELECT run_id AS client_run FROM runq.submit(tenant_id => 'priv', kind => 'k', priority => 1701) \gset
SELECT run_id AS client_run2 FROM runq.submit(tenant_id => 'priv', kind => 'k', priority => 1703) \gset
SELECT results_eq(format('SELECT status FROM runq.get_run(%s)', :client_run), $$VALUES ('queued'::text)$$,
                  'runq_client can read its run through get_run');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[1700])', '42501', NULL, 'runq_client cannot claim');
SELECT throws_ok('SELECT runq.heartbeat(1, 1)', '42501', NULL, 'runq_client cannot heartbeat');
SELECT throws_ok($$SELECT runq.complete(1, 1, '{}')$$, '42501', NULL, 'runq_client cannot complete');
SELECT throws_ok('SELECT * FROM runq.heartbeat_many(ARRAY[1], ARRAY[1])', '42501', NULL,
                 'runq_client cannot heartbeat_many');
SELECT throws_ok('SELECT * FROM runq.complete_many(ARRAY[1], ARRAY[1])', '42501', NULL,
                 'runq_client cannot complete_many');
SELECT throws_ok('SELECT * FROM runq.complete_and_claim(NULL, NULL, NULL, ARRAY[1700])', '42501', NULL,
                 'runq_client cannot complete_and_claim');
SELECT throws_ok('SELECT * FROM runq.sweep()', '42501', NULL, 'runq_client cannot sweep');
SELECT throws_ok('SELECT runq.redrive(1)', '42501', NULL, 'runq_client cannot redrive');
SELECT throws_ok('SELECT * FROM runq.queue_stats', '42501', NULL, 'runq_client cannot read queue_stats');
SELECT throws_ok($$SELECT runq.record_usage(1, 1, '{"tokens": 1}')$$, '42501', NULL, 'runq_client cannot record_usage');
SELECT throws_ok($$SELECT runq.set_budget(1, '{"tokens": 1}')$$, '42501', NULL, 'runq_client cannot set_budget');
SELECT throws_ok($$SELECT * FROM runq.usage_report(now())$$, '42501', NULL, 'runq_client cannot read the usage report');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- From outside: runq_worker
-- ---------------------------------------------------------------------------
SET ROLE runq_worker;
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'priv', kind => 'k')$$, '42501', NULL,
                 'runq_worker cannot submit');
SELECT throws_ok('SELECT runq.redrive(1)', '42501', NULL, 'runq_worker cannot redrive');
SELECT throws_ok('SELECT runq.cancel(1)', '42501', NULL, 'runq_worker cannot cancel');
SELECT throws_ok($$SELECT runq.deliver_input(1, '{}')$$, '42501', NULL, 'runq_worker cannot deliver input');
SELECT throws_ok('SELECT * FROM runq.orphan_report()', '42501', NULL, 'runq_worker cannot read the orphan report');
SELECT throws_ok($$SELECT runq.set_budget(1, '{"tokens": 1}')$$, '42501', NULL, 'runq_worker cannot set_budget');
SELECT throws_ok($$SELECT * FROM runq.usage_report(now())$$, '42501', NULL, 'runq_worker cannot read the usage report');
CREATE TEMP TABLE worker_claim AS SELECT * FROM runq.claim(ARRAY[1700], worker_id => 'w-priv');
GRANT SELECT ON worker_claim TO PUBLIC;
SELECT is((SELECT count(*)::int FROM worker_claim), 1, 'runq_worker can claim the client''s run');
SELECT is(runq.heartbeat((SELECT run_id FROM worker_claim), 1), true, 'runq_worker can heartbeat');
SELECT is(runq.record_usage((SELECT run_id FROM worker_claim), 1, '{"tokens": 1}'), true, 'runq_worker can record_usage');
SELECT is(ARRAY(SELECT alive FROM runq.heartbeat_many(ARRAY(SELECT run_id FROM worker_claim), ARRAY[1::bigint])),
          ARRAY[true], 'runq_worker can heartbeat_many');
SELECT is(runq.complete((SELECT run_id FROM worker_claim), 1, '{"ok": true}'), true, 'runq_worker can complete');
SELECT lives_ok('SELECT * FROM runq.sweep()', 'runq_worker can sweep');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1703])), 1, 'runq_worker claims the client''s second run');
SELECT is(ARRAY(SELECT completed FROM runq.complete_many(ARRAY[:client_run2::bigint], ARRAY[1::bigint])),
          ARRAY[true], 'runq_worker can complete_many');
RESET ROLE;
SET ROLE runq_client;
SELECT run_id AS client_run3 FROM runq.submit(tenant_id => 'priv', kind => 'k', priority => 1704) \gset
SET ROLE runq_worker;
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(NULL, NULL, NULL, ARRAY[1704])'),
                  format('VALUES (NULL::boolean, %s::bigint)', :client_run3),
                  'runq_worker can complete_and_claim');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- From outside: runq_admin
-- ---------------------------------------------------------------------------
SET ROLE runq_admin;
SELECT results_eq($$SELECT status FROM runq.get_run((SELECT run_id FROM worker_claim))$$,
                  $$VALUES ('succeeded'::text)$$, 'runq_admin can read a run');
SELECT lives_ok($$SELECT * FROM runq.submit(tenant_id => 'priv', kind => 'k', priority => 1702)$$, 'runq_admin can submit');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1702])), 1, 'runq_admin can claim');
SELECT lives_ok($$SELECT * FROM runq.heartbeat_many('{}', '{}')$$, 'runq_admin can heartbeat_many');
SELECT lives_ok($$SELECT * FROM runq.complete_many('{}', '{}')$$, 'runq_admin can complete_many');
SELECT lives_ok('SELECT * FROM runq.queue_stats', 'runq_admin can read queue_stats');
SELECT lives_ok('SELECT * FROM runq.orphan_report()', 'runq_admin can read the orphan report');
SELECT lives_ok($$SELECT * FROM runq.usage_report(now() - interval '1 day')$$, 'runq_admin can read the usage report');
SELECT is(runq.set_budget((SELECT run_id FROM worker_claim), '{"tokens": 1}'), false,
          'runq_admin can set_budget (false: the run succeeded)');
SELECT is(runq.record_usage((SELECT run_id FROM worker_claim), 1, '{"tokens": 1}'), false,
          'runq_admin can record_usage (false: the run succeeded)');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- From outside: no role touches a table directly
-- (3 roles x 10 tables x 5 statements = 150 tests)
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE dml (tbl name, col name) ON COMMIT DROP;
GRANT SELECT ON dml TO PUBLIC;
INSERT INTO dml VALUES ('settings', 'lease'), ('runs', 'status'), ('run_events', 'payload'),
                       ('idempotency_keys', 'run_id'), ('checkpoints', 'state'), ('inputs', 'input'),
                       ('tool_calls', 'status'), ('limit_settings', 'max_running'),
                       ('limit_debts', 'debt'), ('pause_settings', 'reason');
CREATE TEMP TABLE stmts (verb text, sql text) ON COMMIT DROP;
GRANT SELECT ON stmts TO PUBLIC;
INSERT INTO stmts VALUES
    ('SELECT',   'SELECT * FROM runq.%1$I'),
    ('INSERT',   'INSERT INTO runq.%1$I DEFAULT VALUES'),
    ('UPDATE',   'UPDATE runq.%1$I SET %2$I = NULL'),
    ('DELETE',   'DELETE FROM runq.%1$I'),
    ('TRUNCATE', 'TRUNCATE runq.%1$I');

SET ROLE runq_client;
SELECT throws_ok(format(s.sql, d.tbl, d.col), '42501', NULL, format('runq_client cannot %s runq.%s', s.verb, d.tbl))
  FROM dml AS d, stmts AS s ORDER BY d.tbl, s.verb;
RESET ROLE;
SET ROLE runq_worker;
SELECT throws_ok(format(s.sql, d.tbl, d.col), '42501', NULL, format('runq_worker cannot %s runq.%s', s.verb, d.tbl))
  FROM dml AS d, stmts AS s ORDER BY d.tbl, s.verb;
RESET ROLE;
SET ROLE runq_admin;
SELECT throws_ok(format(s.sql, d.tbl, d.col), '42501', NULL, format('runq_admin cannot %s runq.%s', s.verb, d.tbl))
  FROM dml AS d, stmts AS s ORDER BY d.tbl, s.verb;
RESET ROLE;

-- ---------------------------------------------------------------------------
-- From outside: a role with no runq grant (PUBLIC's rights only)
-- ---------------------------------------------------------------------------
SELECT 'runq_pgtap_nobody_' || pg_backend_pid() AS nobody \gset
CREATE ROLE :"nobody" NOLOGIN;
SET ROLE :"nobody";
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'priv', kind => 'k')$$, '42501', NULL,
                 'a role without a runq grant cannot submit');
SELECT throws_ok('SELECT * FROM runq.claim(ARRAY[0])', '42501', NULL, 'a role without a runq grant cannot claim');
SELECT throws_ok('SELECT * FROM runq.get_run(1)', '42501', NULL, 'a role without a runq grant cannot read a run');
SELECT throws_ok('SELECT * FROM runq.heartbeat_many(ARRAY[1], ARRAY[1])', '42501', NULL,
                 'a role without a runq grant cannot heartbeat_many');
SELECT throws_ok('SELECT * FROM runq.complete_many(ARRAY[1], ARRAY[1])', '42501', NULL,
                 'a role without a runq grant cannot complete_many');
SELECT throws_ok('SELECT * FROM runq.complete_and_claim(NULL, NULL, NULL, ARRAY[0])', '42501', NULL,
                 'a role without a runq grant cannot complete_and_claim');
SELECT throws_ok('SELECT * FROM runq.runs', '42501', NULL, 'a role without a runq grant cannot read runq.runs');
SELECT throws_ok($$SELECT runq.record_usage(1, 1, '{"tokens": 1}')$$, '42501', NULL,
                 'a role without a runq grant cannot record_usage');
SELECT throws_ok($$SELECT * FROM runq.usage_report(now())$$, '42501', NULL,
                 'a role without a runq grant cannot read the usage report');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
