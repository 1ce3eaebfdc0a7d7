-- runq.release: a lease expiry brought forward. A resume run is
-- requeued at once (scheduled_for NULL, claimable immediately) with its
-- started tool calls resolved, and the attempt its claim took is given back;
-- a fail run, or a zero_work run that did work, fails with code orphaned; a
-- zero_work run that did nothing is requeued at once; a cancel-requested run
-- is cancelled and release returns true. A stale epoch is fenced (false).
-- Every scenario has its own priority class (31xx). Worker calls run as
-- runq_worker, as a worker pool would make them.
BEGIN;
SELECT plan(45);

\ir helpers/recovery.sql

-- ---------------------------------------------------------------------------
-- Roles and arguments
-- ---------------------------------------------------------------------------
SELECT run_id AS r_x FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3100) \gset
SELECT epoch AS e_x FROM runq.claim(ARRAY[3100]) \gset
SET ROLE runq_client;
SELECT throws_ok(format('SELECT runq.release(%s, %s)', :r_x, :e_x), '42501', NULL,
                 'runq_client may not release (42501)');
RESET ROLE;
SELECT throws_ok('SELECT runq.release(-1, 1)', 'RQ003', NULL, 'release of a run that does not exist: RQ003');
SELECT is((SELECT status FROM runq.get_run(:r_x)), 'running', 'the refused release changed nothing');
SELECT is(runq.complete(:r_x, :e_x), true, '(its worker completes it)');

-- ---------------------------------------------------------------------------
-- Policy resume: requeued at once, no attempt used, tool calls resolved
-- ---------------------------------------------------------------------------
SELECT run_id AS r FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3101,
                                    max_attempts => 1) \gset
SET ROLE runq_worker;
SELECT epoch AS e, attempt AS a FROM runq.claim(ARRAY[3101], lease => interval '1 hour') \gset
SELECT is(ARRAY[:e, :a], ARRAY[1, 1], 'resume: claimed as epoch 1, attempt 1 of 1');
SELECT ok(runq.checkpoint(:r, :e, '{"step": 7}')
          AND runq.begin_tool(:r, :e, 'c1', 'lookup', 'read_only')
          AND runq.begin_tool(:r, :e, 'c2', 'upsert', 'idempotent')
          AND runq.begin_tool(:r, :e, 'c3', 'send_mail', 'non_idempotent'),
          'resume: the worker checkpoints and starts three tool calls');
SELECT is(runq.release(:r, :e), true, 'resume: release returns true');
RESET ROLE;
SELECT results_eq(format('SELECT status, attempts, scheduled_for, failure, finished_at FROM runq.get_run(%s)', :r),
                  $$VALUES ('queued'::text, 0, NULL::timestamptz, NULL::jsonb, NULL::timestamptz)$$,
                  'resume: queued, attempts back to 0, scheduled_for NULL (no backoff), no failure');
SELECT is(pg_temp.events(:r),
          ARRAY['run.created@0', 'run.claimed@1', 'run.checkpointed@1', 'run.tool_started@1',
                'run.tool_started@1', 'run.tool_started@1', 'run.tool_uncertain@1', 'run.requeued@1'],
          'resume: run.tool_uncertain then run.requeued, both under epoch 1');
SELECT results_eq(format('SELECT call_id, status FROM runq.tool_calls(%s) ORDER BY call_id', :r),
                  $$VALUES ('c1'::text, 'retryable'::text), ('c2', 'retryable'), ('c3', 'uncertain')$$,
                  'resume: read_only and idempotent calls retryable, the non_idempotent one uncertain');

SET ROLE runq_worker;
CREATE TEMP TABLE reclaim AS
SELECT * FROM runq.claim(ARRAY[3101], lease => interval '1 millisecond');
SELECT results_eq('SELECT run_id, epoch, attempt, checkpoint, resumed FROM reclaim',
                  format($$VALUES (%s::bigint, 2::bigint, 1, '{"step": 7}'::jsonb, true)$$, :r),
                  'resume: claimable at once, resumed from the checkpoint as attempt 1 again, epoch 2');
SELECT is(runq.release(:r, 1), false, 'a release under the stale epoch 1 is fenced: false');
RESET ROLE;
SELECT results_eq(format('SELECT status, lease_epoch, attempts FROM runq.get_run(%s)', :r),
                  $$VALUES ('running'::text, 2::bigint, 1)$$,
                  'the fenced release changed nothing in the run');
SELECT is((SELECT count(*)::int FROM runq.run_events(:r) WHERE type = 'run.fenced' AND epoch = 1), 1,
          'the fenced release appended one run.fenced for epoch 1');

-- The releases used no attempt: with max_attempts 1, the lease that now
-- expires is the one attempt, and only then is the run dead-lettered.
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT results_eq('SELECT run_id, action FROM runq.sweep()',
                  format($$VALUES (%s::bigint, 'dead_lettered'::text)$$, :r),
                  'resume: after a release, the next expiry is still attempt 1 of 1 and dead-letters');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r),
                  $$VALUES ('failed'::text, 'max_attempts_exceeded'::text, 1, 2)$$,
                  'resume: max_attempts_exceeded on attempt 1, epoch 2');

-- Many releases never exhaust the attempts.
SELECT run_id AS r2 FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3102,
                                     max_attempts => 2) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3102]) \gset
SELECT is(runq.release(:r2, :e), true, 'resume: release 1');
SELECT epoch AS e FROM runq.claim(ARRAY[3102]) \gset
SELECT is(runq.release(:r2, :e), true, 'resume: release 2');
SELECT epoch AS e FROM runq.claim(ARRAY[3102]) \gset
SELECT is(runq.release(:r2, :e), true, 'resume: release 3');
SELECT results_eq(format('SELECT status, attempts, lease_epoch FROM runq.get_run(%s)', :r2),
                  $$VALUES ('queued'::text, 0, 3::bigint)$$,
                  'resume: three releases of a max_attempts 2 run: queued, attempts 0, epoch 3');
SELECT is(pg_temp.events(:r2),
          ARRAY['run.created@0', 'run.claimed@1', 'run.requeued@1', 'run.claimed@2', 'run.requeued@2',
                'run.claimed@3', 'run.requeued@3'],
          'resume: each release appends run.requeued under its epoch');
SELECT is((SELECT attempt FROM runq.claim(ARRAY[3102])), 1, 'resume: the next claim is attempt 1');

-- ---------------------------------------------------------------------------
-- Policy fail: orphaned, even without work
-- ---------------------------------------------------------------------------
SELECT run_id AS r_f FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3110,
                                      recovery_policy => 'fail') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3110]) \gset
SELECT is(runq.release(:r_f, :e), true, 'fail: release returns true');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r_f),
                  $$VALUES ('failed'::text, 'orphaned'::text, 1, 1)$$,
                  'fail: failed, code orphaned, on attempt 1, epoch 1');
SELECT ok(pg_temp.failure_complete(:r_f), 'fail: the failure has code, message, attempt, epoch and at');
SELECT is((SELECT attempts FROM runq.get_run(:r_f)), 0, 'fail: the release gave the attempt back');
SELECT is(pg_temp.events(:r_f), ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1'],
          'fail: events created, claimed, failed (epoch 1)');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[3110])', 'fail: the run is not claimable');

-- ---------------------------------------------------------------------------
-- Policy zero_work
-- ---------------------------------------------------------------------------
-- No work: requeued at once.
SELECT run_id AS r_z FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3120,
                                      recovery_policy => 'zero_work') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3120]) \gset
SELECT is(runq.release(:r_z, :e), true, 'zero_work, no work: release returns true');
SELECT results_eq(format('SELECT status, attempts, scheduled_for, failure FROM runq.get_run(%s)', :r_z),
                  $$VALUES ('queued'::text, 0, NULL::timestamptz, NULL::jsonb)$$,
                  'zero_work, no work: queued, attempts 0, scheduled_for NULL');
SELECT is(pg_temp.events(:r_z), ARRAY['run.created@0', 'run.claimed@1', 'run.requeued@1'],
          'zero_work, no work: events created, claimed, requeued (epoch 1)');
SELECT results_eq('SELECT run_id, epoch, attempt FROM runq.claim(ARRAY[3120])',
                  format('VALUES (%s::bigint, 2::bigint, 1)', :r_z),
                  'zero_work, no work: claimable at once (epoch 2, attempt 1)');

-- A turn: orphaned.
SELECT run_id AS r_zt FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3121,
                                       recovery_policy => 'zero_work') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3121]) \gset
SELECT is(runq.begin_turn(:r_zt, :e), true, 'zero_work + turn: a turn begins');
SELECT is(runq.release(:r_zt, :e), true, 'zero_work + turn: release returns true');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r_zt),
                  $$VALUES ('failed'::text, 'orphaned'::text, 1, 1)$$,
                  'zero_work + turn: failed, code orphaned, attempt 1, epoch 1');
SELECT ok(pg_temp.failure_complete(:r_zt), 'zero_work + turn: the failure has code, message, attempt, epoch and at');
SELECT is(pg_temp.events(:r_zt), ARRAY['run.created@0', 'run.claimed@1', 'run.turn_started@1', 'run.failed@1'],
          'zero_work + turn: events end with run.failed (epoch 1)');

-- A tool call: orphaned.
SELECT run_id AS r_zc FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3122,
                                       recovery_policy => 'zero_work') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3122]) \gset
SELECT ok(runq.begin_tool(:r_zc, :e, 'c1', 'lookup', 'read_only'), 'zero_work + tool call: a call begins');
SELECT is(runq.release(:r_zc, :e), true, 'zero_work + tool call: release returns true');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :r_zc),
                  $$VALUES ('failed'::text, 'orphaned'::text)$$,
                  'zero_work + tool call: failed, code orphaned');

-- ---------------------------------------------------------------------------
-- Cancel requested: release cancels and returns true
-- ---------------------------------------------------------------------------
SELECT run_id AS r_c FROM runq.submit(tenant_id => 'rel', kind => 'k', priority => 3130) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3130]) \gset
SELECT is(runq.cancel(:r_c), 'cancel_requested', 'cancel: the running run gets the flag');
SELECT is(runq.release(:r_c, :e), true, 'cancel: release of a cancel-requested run returns true');
SELECT results_eq(format('SELECT status, failure, finished_at IS NOT NULL FROM runq.get_run(%s)', :r_c),
                  $$VALUES ('cancelled'::text, NULL::jsonb, true)$$,
                  'cancel: the run is cancelled and finished, without a failure');
SELECT is(pg_temp.events(:r_c),
          ARRAY['run.created@0', 'run.claimed@1', 'run.cancel_requested@1', 'run.cancelled@1'],
          'cancel: events end with run.cancelled (epoch 1)');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[3130])', 'cancel: the run is not claimable');

SELECT * FROM finish();
ROLLBACK;
