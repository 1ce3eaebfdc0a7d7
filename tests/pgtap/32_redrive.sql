-- runq.redrive: a failed run, whatever failed it, goes back to
-- queued with its attempts reset, its failure cleared and a run.redriven
-- event, and is claimable at once; RQ002 when its session has another active
-- run, RQ004 when the run is not failed, RQ003 when there is no such run; a
-- refused redrive changes nothing. Only runq_admin may redrive. Every
-- scenario has its own priority class (32xx).
BEGIN;
SELECT plan(33);

\ir helpers/recovery.sql

-- ---------------------------------------------------------------------------
-- A run the worker failed (a permanent classification), redriven by an admin
-- ---------------------------------------------------------------------------
SELECT run_id AS r FROM runq.submit(tenant_id => 'red', kind => 'k', session_id => 'red-1',
                                    priority => 3200, max_attempts => 2) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3200]) \gset
SELECT is(runq.fail(:r, :e, '{"code": "tool_error", "message": "the tool broke"}'), true,
          'the worker fails the run');
SELECT is((SELECT status FROM runq.get_run(:r)), 'failed', 'the run is in the dead letter');

SET ROLE runq_worker;
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r), '42501', NULL, 'runq_worker may not redrive (42501)');
RESET ROLE;
SET ROLE runq_client;
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r), '42501', NULL, 'runq_client may not redrive (42501)');
RESET ROLE;

SET ROLE runq_admin;
SELECT is(runq.redrive(:r, 'fixed the tool'), true, 'runq_admin redrives the failed run: true');
RESET ROLE;
SELECT results_eq(format($$SELECT status, attempts, failure, scheduled_for, finished_at, lease_epoch
                             FROM runq.get_run(%s)$$, :r),
                  $$VALUES ('queued'::text, 0, NULL::jsonb, NULL::timestamptz, NULL::timestamptz, 1::bigint)$$,
                  'redrive: queued, attempts 0, failure NULL, not scheduled, not finished, epoch unchanged');
SELECT is(pg_temp.events(:r),
          ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1', 'run.redriven@1'],
          'redrive: appends run.redriven with the run''s epoch');
SELECT results_eq($$SELECT run_id, epoch, attempt, resumed
                      FROM runq.claim(ARRAY[3200], lease => interval '1 millisecond')$$,
                  format('VALUES (%s::bigint, 2::bigint, 1, true)', :r),
                  'redrive: claimable at once, as attempt 1 under epoch 2');

-- The reset attempts are real: max_attempts 2 allows two more executions.
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT results_eq('SELECT run_id, action FROM runq.sweep()', format($$VALUES (%s::bigint, 'requeued'::text)$$, :r),
                  'redrive: attempt 1 of 2 after the redrive expires and is requeued');
UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r;  -- fixture: skip the backoff
SELECT epoch AS e FROM runq.claim(ARRAY[3200], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT results_eq('SELECT run_id, action FROM runq.sweep()',
                  format($$VALUES (%s::bigint, 'dead_lettered'::text)$$, :r),
                  'redrive: attempt 2 of 2 expires and is dead-lettered');

-- ---------------------------------------------------------------------------
-- A dead-lettered run (max_attempts_exceeded) and an orphaned one redrive too
-- ---------------------------------------------------------------------------
SELECT is(runq.redrive(:r), true, 'redrive of a max_attempts_exceeded run: true');
SELECT results_eq(format('SELECT status, attempts, failure FROM runq.get_run(%s)', :r),
                  $$VALUES ('queued'::text, 0, NULL::jsonb)$$,
                  'redrive of a dead-lettered run: queued, attempts 0, failure NULL');
SELECT is((SELECT array_agg(epoch ORDER BY event_id) FROM runq.run_events(:r) WHERE type = 'run.redriven'),
          ARRAY[1, 3]::bigint[], 'one run.redriven per redrive, each with the epoch of its time');

SELECT run_id AS r_o FROM runq.submit(tenant_id => 'red', kind => 'k', priority => 3201,
                                      recovery_policy => 'fail') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3201]) \gset
SELECT is(runq.release(:r_o, :e), true, 'a fail-policy run released: orphaned');
SELECT is(runq.redrive(:r_o), true, 'redrive of an orphaned run: true');
SELECT results_eq(format('SELECT status, attempts, failure FROM runq.get_run(%s)', :r_o),
                  $$VALUES ('queued'::text, 0, NULL::jsonb)$$,
                  'redrive of an orphaned run: queued, attempts 0, failure NULL');

-- ---------------------------------------------------------------------------
-- RQ002: the failed run's session has moved on
-- ---------------------------------------------------------------------------
SELECT run_id AS r_s FROM runq.submit(tenant_id => 'red', kind => 'k', session_id => 'red-2',
                                      priority => 3202) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3202]) \gset
SELECT is(runq.fail(:r_s, :e, '{"code": "bad_input"}'), true, 'the session''s run fails');
SELECT run_id AS r_next FROM runq.submit(tenant_id => 'red', kind => 'k', session_id => 'red-2',
                                         priority => 3202) \gset
SELECT isnt(:r_next::bigint, :r_s::bigint, 'a new run is submitted to the same session');
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r_s), 'RQ002', NULL,
                 'redrive while the session has a queued run: RQ002');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :r_s),
                  $$VALUES ('failed'::text, 'bad_input'::text)$$,
                  'the refused redrive left the run failed, its failure intact');
SELECT is(pg_temp.events(:r_s), ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1'],
          'the refused redrive appended no event');
SELECT epoch AS e_next FROM runq.claim(ARRAY[3202]) \gset
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r_s), 'RQ002', NULL,
                 'redrive while the session has a running run: RQ002');
SELECT is(runq.complete(:r_next, :e_next), true, 'the session''s new run completes');
SELECT is(runq.redrive(:r_s), true, 'once the session is idle, the redrive succeeds');

-- ---------------------------------------------------------------------------
-- RQ004: only a failed run can be redriven; RQ003: no such run
-- ---------------------------------------------------------------------------
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r_s), 'RQ004', NULL, 'redrive of a queued run: RQ004');
SELECT epoch AS e FROM runq.claim(ARRAY[3202]) \gset
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r_s), 'RQ004', NULL, 'redrive of a running run: RQ004');
SELECT is(runq.ask_user(:r_s, :e, '{"q": "which?"}'), true, '(the run asks the user)');
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r_s), 'RQ004', NULL,
                 'redrive of a waiting_for_user run: RQ004');
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r_next), 'RQ004', NULL, 'redrive of a succeeded run: RQ004');
SELECT run_id AS r_cx FROM runq.submit(tenant_id => 'red', kind => 'k', priority => 3203) \gset
SELECT is(runq.cancel(:r_cx), 'cancelled', '(a queued run is cancelled)');
SELECT throws_ok(format('SELECT runq.redrive(%s)', :r_cx), 'RQ004', NULL, 'redrive of a cancelled run: RQ004');
SELECT is((SELECT status FROM runq.get_run(:r_next)), 'succeeded', 'the refused redrive left the run succeeded');
SELECT throws_ok('SELECT runq.redrive(-1)', 'RQ003', NULL, 'redrive of a run that does not exist: RQ003');

SELECT * FROM finish();
ROLLBACK;
