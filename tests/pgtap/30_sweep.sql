-- runq.sweep: for each running run whose lease expired, the lease-expiry
-- rules of docs/contract.md "Recovery" in order (cancel requested, attempts
-- exhausted, policy fail, policy zero_work, policy resume; the deadline's rule
-- is 26_deadlines.sql's), with the resulting status, failure,
-- events, attempts and scheduled_for; the resume backoff (grows, is capped);
-- tool calls left started resolved to retryable or uncertain and seen by the
-- next claim, which resumes from the newest checkpoint; max_runs; roles.
-- Leases expire fast: claim with a 1 ms lease, then sleep 5 ms (the functions
-- read clock_timestamp(), so time moves inside the transaction). Every
-- scenario has its own priority class (30xx), so claims never pick up another
-- scenario's run, and each scenario is decided before the next begins, so a
-- sweep (which sweeps the whole database) returns exactly the runs named.
BEGIN;
SELECT plan(94);

\ir helpers/recovery.sql
-- The failure's attempt and epoch.
CREATE FUNCTION pg_temp.failed_in(bigint) RETURNS integer[] LANGUAGE sql AS $$
    SELECT ARRAY[(r.failure ->> 'attempt')::integer, (r.failure ->> 'epoch')::integer]
      FROM runq.get_run($1) AS r
$$;
-- The backoff the sweep applied: scheduled_for minus the time of the newest run.requeued.
CREATE FUNCTION pg_temp.backoff(bigint) RETURNS interval LANGUAGE sql AS $$
    SELECT r.scheduled_for - (SELECT e.created_at FROM runq.run_events($1) AS e
                               WHERE e.type = 'run.requeued'
                               ORDER BY e.event_id DESC LIMIT 1)
      FROM runq.get_run($1) AS r
$$;

-- ---------------------------------------------------------------------------
-- Arguments and roles
-- ---------------------------------------------------------------------------
SELECT throws_ok('SELECT * FROM runq.sweep(max_runs => 0)', '22023', NULL,
                 'sweep refuses max_runs 0 with 22023');
SELECT throws_ok('SELECT * FROM runq.sweep(max_runs => -5)', '22023', NULL,
                 'sweep refuses a negative max_runs with 22023');
SELECT throws_ok('SELECT * FROM runq.sweep(max_runs => NULL)', '22023', NULL,
                 'sweep refuses a NULL max_runs with 22023');

SELECT run_id AS r_role FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3000) \gset
SELECT epoch AS e_role FROM runq.claim(ARRAY[3000], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;

SET ROLE runq_client;
SELECT throws_ok('SELECT * FROM runq.sweep()', '42501', NULL, 'runq_client may not sweep (42501)');
RESET ROLE;
SET ROLE runq_worker;
SELECT is(pg_temp.swept(), ARRAY[:r_role || ':requeued'],
          'runq_worker may sweep: the expired lease is requeued');
RESET ROLE;
SET ROLE runq_admin;
SELECT is(pg_temp.swept(), '{}'::text[], 'runq_admin may sweep; nothing is left to decide');
RESET ROLE;

-- A lease that has not expired is not the sweep's business.
SELECT run_id AS r_live FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3001) \gset
SELECT epoch AS e_live FROM runq.claim(ARRAY[3001]) \gset
SELECT is(pg_temp.swept(), '{}'::text[], 'a running run with a live lease is not swept');
SELECT is((SELECT status FROM runq.get_run(:r_live)), 'running', 'and it is still running');
SELECT is(runq.complete(:r_live, :e_live), true, '(its worker completes it)');

-- ---------------------------------------------------------------------------
-- Rule 5, policy resume: requeued with scheduled_for = now + backoff(attempts),
-- 1 s, 2 s, 4 s with the defaults; then rule 2 dead-letters the 4th expiry of
-- a run with max_attempts 4: it executed exactly max_attempts times.
-- ---------------------------------------------------------------------------
SELECT run_id AS r_bo FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3010,
                                       max_attempts => 4) \gset

SELECT epoch AS e, attempt AS a FROM runq.claim(ARRAY[3010], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_bo || ':requeued'], 'resume: attempt 1''s expired lease is requeued');
SELECT results_eq(format('SELECT status, attempts, failure FROM runq.get_run(%s)', :r_bo),
                  $$VALUES ('queued'::text, 1, NULL::jsonb)$$,
                  'resume: queued again, attempts still 1 (the sweep gives no attempt back), no failure');
SELECT is(pg_temp.backoff(:r_bo), interval '1 second',
          'resume: backoff after attempt 1 is the base, 1 s');
SELECT is((SELECT updated_at FROM runq.get_run(:r_bo)) + interval '1 second',
          (SELECT scheduled_for FROM runq.get_run(:r_bo)),
          'resume: scheduled_for is 1 s after the requeue (updated_at)');
SELECT is(pg_temp.events(:r_bo), ARRAY['run.created@0', 'run.claimed@1', 'run.requeued@1'],
          'resume: run.requeued is logged under the dead epoch 1');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[3010])',
                'resume: while the backoff runs the run is not claimable');

UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_bo;  -- fixture: skip the wait
SELECT epoch AS e, attempt AS a FROM runq.claim(ARRAY[3010], lease => interval '1 millisecond') \gset
SELECT is(ARRAY[:a, :e], ARRAY[2, 2], 'resume: the next claim is attempt 2, epoch 2');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_bo || ':requeued'], 'resume: attempt 2''s expired lease is requeued');
SELECT is(pg_temp.backoff(:r_bo), interval '2 seconds', 'resume: backoff after attempt 2 is 2 s');

UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_bo;
SELECT epoch AS e, attempt AS a FROM runq.claim(ARRAY[3010], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_bo || ':requeued'], 'resume: attempt 3''s expired lease is requeued');
SELECT is(pg_temp.backoff(:r_bo), interval '4 seconds', 'resume: backoff after attempt 3 is 4 s');
SELECT is((SELECT attempts FROM runq.get_run(:r_bo)), 3, 'resume: attempts is 3');

UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_bo;
SELECT epoch AS e, attempt AS a FROM runq.claim(ARRAY[3010], lease => interval '1 millisecond') \gset
SELECT is(ARRAY[:a, :e], ARRAY[4, 4], 'rule 2: the last claim is attempt 4 of 4, epoch 4');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_bo || ':dead_lettered'],
          'rule 2: the expired lease of the last attempt is dead_lettered');
SELECT results_eq(format('SELECT status, attempts, failure ->> ''code'' FROM runq.get_run(%s)', :r_bo),
                  $$VALUES ('failed'::text, 4, 'max_attempts_exceeded'::text)$$,
                  'rule 2: failed with code max_attempts_exceeded, attempts 4');
SELECT ok(pg_temp.failure_complete(:r_bo), 'rule 2: the failure has code, message, attempt, epoch and at');
SELECT is(pg_temp.failed_in(:r_bo), ARRAY[4, 4], 'rule 2: the failure names attempt 4, epoch 4');
SELECT ok((SELECT finished_at IS NOT NULL FROM runq.get_run(:r_bo)), 'rule 2: the run is finished');
SELECT is(pg_temp.events(:r_bo),
          ARRAY['run.created@0', 'run.claimed@1', 'run.requeued@1', 'run.claimed@2', 'run.requeued@2',
                'run.claimed@3', 'run.requeued@3', 'run.claimed@4', 'run.failed@4'],
          'rule 2: events: three requeues, then run.failed under epoch 4');
SELECT is((SELECT count(*)::int FROM runq.run_events(:r_bo) WHERE type = 'run.claimed'), 4,
          'rule 2: the run executed max_attempts (4) times, no more');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[3010])', 'rule 2: a dead-lettered run is not claimable');

-- With the default max_attempts (3), the third expiry dead-letters.
SELECT run_id AS r_d3 FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3012) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3012], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_d3 || ':requeued'], 'default max_attempts: expiry 1 requeues');
UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_d3;
SELECT epoch AS e FROM runq.claim(ARRAY[3012], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_d3 || ':requeued'], 'default max_attempts: expiry 2 requeues');
UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_d3;
SELECT epoch AS e FROM runq.claim(ARRAY[3012], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_d3 || ':dead_lettered'],
          'default max_attempts: expiry 3 dead-letters (3 executions)');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int
                             FROM runq.get_run(%s)$$, :r_d3),
                  $$VALUES ('failed'::text, 'max_attempts_exceeded'::text, 3)$$,
                  'default max_attempts: failed, max_attempts_exceeded, on attempt 3');

-- ---------------------------------------------------------------------------
-- The backoff is capped by runq.settings.backoff_cap, and follows the settings
-- ---------------------------------------------------------------------------
UPDATE runq.settings SET backoff_cap = interval '1500 milliseconds';
SELECT run_id AS r_cap FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3011,
                                        max_attempts => 5) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3011], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_cap || ':requeued'], 'cap: attempt 1 requeued');
SELECT is(pg_temp.backoff(:r_cap), interval '1 second', 'cap: attempt 1 backs off 1 s (under the cap)');
UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_cap;
SELECT epoch AS e FROM runq.claim(ARRAY[3011], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_cap || ':requeued'], 'cap: attempt 2 requeued');
SELECT is(pg_temp.backoff(:r_cap), interval '1500 milliseconds',
          'cap: attempt 2 backs off the cap, 1.5 s, not 2 s');
UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_cap;
SELECT epoch AS e FROM runq.claim(ARRAY[3011], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_cap || ':requeued'], 'cap: attempt 3 requeued');
SELECT is(pg_temp.backoff(:r_cap), interval '1500 milliseconds',
          'cap: attempt 3 backs off the cap, 1.5 s, not 4 s');

-- A DBA's base is used as is: 10 ms, so the run is claimable again after a nap
-- with no fixture.
UPDATE runq.settings SET backoff_base = interval '10 milliseconds', backoff_cap = interval '5 minutes';
UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_cap;
SELECT epoch AS e FROM runq.claim(ARRAY[3011], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_cap || ':requeued'], 'base: attempt 4 requeued');
SELECT is(pg_temp.backoff(:r_cap), interval '80 milliseconds',
          'base: attempt 4 backs off base * 2^3 = 80 ms');
DO $$ BEGIN PERFORM pg_sleep(0.09); END $$;
SELECT run_id AS c, epoch AS e FROM runq.claim(ARRAY[3011]) \gset
SELECT is(:c::bigint, :r_cap::bigint, 'base: once the backoff has passed the run is claimable');
SELECT is(runq.complete(:r_cap, :e), true, '(its worker completes it)');
UPDATE runq.settings SET backoff_base = interval '1 second';

-- ---------------------------------------------------------------------------
-- Rule 5 with tool calls and checkpoints: started calls become retryable
-- (read_only, idempotent) or uncertain (non_idempotent, run.tool_uncertain);
-- the next claim resumes from the newest checkpoint and sees the calls.
-- ---------------------------------------------------------------------------
SELECT run_id AS r_tc FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3020) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3020], lease => interval '1 millisecond') \gset
SELECT ok(runq.checkpoint(:r_tc, :e, '{"step": 1}')
          AND runq.begin_tool(:r_tc, :e, 'c1', 'search', 'read_only')
          AND runq.end_tool(:r_tc, :e, 'c1', '{"hits": 3}')
          AND runq.checkpoint(:r_tc, :e, '{"step": 2}')
          AND runq.begin_tool(:r_tc, :e, 'c2', 'search', 'read_only')
          AND runq.begin_tool(:r_tc, :e, 'c3', 'put_file', 'idempotent')
          AND runq.begin_tool(:r_tc, :e, 'c4', 'pay', 'non_idempotent'),
          'tool calls: the worker checkpoints twice, finishes c1 and leaves c2, c3, c4 started');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_tc || ':requeued'], 'tool calls: the resume run is requeued');
SELECT results_eq(format('SELECT call_id, status, epoch FROM runq.tool_calls(%s) ORDER BY call_id', :r_tc),
                  $$VALUES ('c1'::text, 'finished'::text, 1::bigint), ('c2', 'retryable', 1),
                           ('c3', 'retryable', 1), ('c4', 'uncertain', 1)$$,
                  'tool calls: finished stays finished; read_only and idempotent retryable; non_idempotent uncertain');
SELECT is(pg_temp.events(:r_tc),
          ARRAY['run.created@0', 'run.claimed@1', 'run.checkpointed@1', 'run.tool_started@1',
                'run.tool_finished@1', 'run.checkpointed@1', 'run.tool_started@1', 'run.tool_started@1',
                'run.tool_started@1', 'run.tool_uncertain@1', 'run.requeued@1'],
          'tool calls: one run.tool_uncertain (epoch 1) for the non_idempotent call, before run.requeued');

UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = :r_tc;
SET ROLE runq_worker;
CREATE TEMP TABLE claim_tc AS SELECT * FROM runq.claim(ARRAY[3020], worker_id => 'w2');
SELECT results_eq('SELECT run_id, epoch, attempt, checkpoint, inputs, resumed FROM claim_tc',
                  format($$VALUES (%s::bigint, 2::bigint, 2, '{"step": 2}'::jsonb, '[]'::jsonb, true)$$, :r_tc),
                  'tool calls: the next claim resumes from the newest checkpoint (epoch 2, attempt 2)');
SELECT results_eq(format('SELECT call_id, status FROM runq.tool_calls(%s) ORDER BY call_id', :r_tc),
                  $$VALUES ('c1'::text, 'finished'::text), ('c2', 'retryable'), ('c3', 'retryable'),
                           ('c4', 'uncertain')$$,
                  'tool calls: the new worker (runq_worker) reads them through runq.tool_calls');
SELECT is(runq.complete(:r_tc, 2), true, 'tool calls: the new holder completes the run');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- Rule 4, policy zero_work
-- ---------------------------------------------------------------------------
-- No turn, no tool call, no queue_ttl: requeued claimable at once.
SELECT run_id AS r_zw FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3030,
                                       recovery_policy => 'zero_work') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3030], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_zw || ':requeued'], 'zero_work, no work: requeued');
SELECT results_eq(format('SELECT status, attempts, scheduled_for, failure FROM runq.get_run(%s)', :r_zw),
                  $$VALUES ('queued'::text, 1, NULL::timestamptz, NULL::jsonb)$$,
                  'zero_work, no work: queued, attempts 1, scheduled_for NULL (no backoff), no failure');
SELECT is(pg_temp.events(:r_zw), ARRAY['run.created@0', 'run.claimed@1', 'run.requeued@1'],
          'zero_work, no work: events created, claimed, requeued (epoch 1)');
SELECT run_id AS c, epoch AS e, attempt AS a, resumed AS res
  FROM runq.claim(ARRAY[3030], lease => interval '1 millisecond') \gset
SELECT is(ARRAY[:c, :e, :a]::bigint[], ARRAY[:r_zw, 2, 2]::bigint[],
          'zero_work, no work: claimable at once, by the next claim (epoch 2, attempt 2)');
-- The second execution begins a turn, then dies: now it did work.
SELECT is(runq.begin_turn(:r_zw, :e), true, 'zero_work: epoch 2 begins a turn');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_zw || ':orphaned'], 'zero_work: after a turn the expired run is orphaned');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r_zw),
                  $$VALUES ('failed'::text, 'orphaned'::text, 2, 2)$$,
                  'zero_work: failed, code orphaned, attempt 2, epoch 2');

-- A turn: refused requeue, orphaned.
SELECT run_id AS r_zt FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3031,
                                       recovery_policy => 'zero_work') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3031], lease => interval '1 millisecond') \gset
SELECT is(runq.begin_turn(:r_zt, :e), true, 'zero_work + turn: the worker begins a turn');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_zt || ':orphaned'], 'zero_work + turn: orphaned, not requeued');
SELECT results_eq(format($$SELECT status, attempts, failure ->> 'code' FROM runq.get_run(%s)$$, :r_zt),
                  $$VALUES ('failed'::text, 1, 'orphaned'::text)$$,
                  'zero_work + turn: failed, code orphaned, attempts 1');
SELECT ok(pg_temp.failure_complete(:r_zt), 'zero_work + turn: the failure has code, message, attempt, epoch and at');
SELECT is(pg_temp.failed_in(:r_zt), ARRAY[1, 1], 'zero_work + turn: the failure names attempt 1, epoch 1');
SELECT is(pg_temp.events(:r_zt), ARRAY['run.created@0', 'run.claimed@1', 'run.turn_started@1', 'run.failed@1'],
          'zero_work + turn: events created, claimed, turn_started, failed (epoch 1)');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[3031])', 'zero_work + turn: nothing to claim');

-- A tool call, even a finished read-only one: refused requeue, orphaned.
SELECT run_id AS r_zt2 FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3032,
                                        recovery_policy => 'zero_work') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3032], lease => interval '1 millisecond') \gset
SELECT ok(runq.begin_tool(:r_zt2, :e, 'c1', 'search', 'read_only')
          AND runq.end_tool(:r_zt2, :e, 'c1', '{}'),
          'zero_work + tool call: the worker runs one read-only tool call');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_zt2 || ':orphaned'], 'zero_work + tool call: orphaned, not requeued');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r_zt2),
                  $$VALUES ('failed'::text, 'orphaned'::text, 1, 1)$$,
                  'zero_work + tool call: failed, code orphaned, attempt 1, epoch 1');
SELECT is(pg_temp.events(:r_zt2),
          ARRAY['run.created@0', 'run.claimed@1', 'run.tool_started@1', 'run.tool_finished@1', 'run.failed@1'],
          'zero_work + tool call: events end with run.failed (epoch 1)');

-- Work in any epoch counts: a turn in epoch 1, redriven, no work in epoch 2.
SELECT run_id AS r_ze FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3033,
                                       recovery_policy => 'zero_work') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3033], lease => interval '1 millisecond') \gset
SELECT is(runq.begin_turn(:r_ze, :e), true, 'zero_work, any epoch: epoch 1 begins a turn');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_ze || ':orphaned'], 'zero_work, any epoch: epoch 1 is orphaned');
SELECT is(runq.redrive(:r_ze), true, 'zero_work, any epoch: an operator redrives it');
SELECT epoch AS e FROM runq.claim(ARRAY[3033], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_ze || ':orphaned'],
          'zero_work, any epoch: epoch 2 did nothing, but the run did work in epoch 1: orphaned');
SELECT is(pg_temp.failed_in(:r_ze), ARRAY[1, 2], 'zero_work, any epoch: the failure names attempt 1, epoch 2');

-- ---------------------------------------------------------------------------
-- Rule 3, policy fail: orphaned even without any work
-- ---------------------------------------------------------------------------
SELECT run_id AS r_f FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3040,
                                      recovery_policy => 'fail') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3040], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_f || ':orphaned'], 'fail: the expired run is orphaned');
SELECT results_eq(format($$SELECT status, attempts, scheduled_for, failure ->> 'code' FROM runq.get_run(%s)$$, :r_f),
                  $$VALUES ('failed'::text, 1, NULL::timestamptz, 'orphaned'::text)$$,
                  'fail: failed, code orphaned, attempts 1');
SELECT ok(pg_temp.failure_complete(:r_f), 'fail: the failure has code, message, attempt, epoch and at');
SELECT is(pg_temp.failed_in(:r_f), ARRAY[1, 1], 'fail: the failure names attempt 1, epoch 1');
SELECT is(pg_temp.events(:r_f), ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1'],
          'fail: events created, claimed, failed (epoch 1)');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[3040])', 'fail: nothing to claim');

-- ---------------------------------------------------------------------------
-- Rule 1 before everything: cancel requested -> cancelled, even when the
-- attempts are used up and the policy is fail
-- ---------------------------------------------------------------------------
SELECT run_id AS r_c FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3050,
                                      recovery_policy => 'fail', max_attempts => 1) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3050], lease => interval '1 millisecond') \gset
SELECT is(runq.cancel(:r_c), 'cancel_requested', 'cancel: a running run gets the cancel flag');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_c || ':cancelled'], 'cancel requested + expired lease: action cancelled');
SELECT results_eq(format('SELECT status, attempts, failure, finished_at IS NOT NULL FROM runq.get_run(%s)', :r_c),
                  $$VALUES ('cancelled'::text, 1, NULL::jsonb, true)$$,
                  'cancel: cancelled (not dead-lettered, not orphaned), no failure, finished');
SELECT is(pg_temp.events(:r_c),
          ARRAY['run.created@0', 'run.claimed@1', 'run.cancel_requested@1', 'run.cancelled@1'],
          'cancel: events end with run.cancelled (epoch 1)');

-- ---------------------------------------------------------------------------
-- Rule 2 before rules 3 and 4
-- ---------------------------------------------------------------------------
SELECT run_id AS r_2f FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3060,
                                       recovery_policy => 'fail', max_attempts => 1) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3060], lease => interval '1 millisecond') \gset
SELECT run_id AS r_2z FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3061,
                                       recovery_policy => 'zero_work', max_attempts => 1) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3061], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_2f || ':dead_lettered', :r_2z || ':dead_lettered'],
          'rule 2 first: policy fail and zero_work (no work) with attempts used up are dead_lettered');
SELECT results_eq(format($$SELECT status::text, failure ->> 'code' FROM runq.runs
                            WHERE run_id IN (%s, %s) ORDER BY run_id$$, :r_2f, :r_2z),
                  $$VALUES ('failed'::text, 'max_attempts_exceeded'::text),
                           ('failed', 'max_attempts_exceeded')$$,
                  'rule 2 first: both failed with code max_attempts_exceeded');
SELECT is(pg_temp.failed_in(:r_2z), ARRAY[1, 1], 'rule 2: the failure names attempt 1, epoch 1');

-- ---------------------------------------------------------------------------
-- max_runs
-- ---------------------------------------------------------------------------
SELECT run_id AS m1 FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3070) \gset
SELECT run_id AS m2 FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3070) \gset
SELECT run_id AS m3 FROM runq.submit(tenant_id => 'sweep', kind => 'k', priority => 3070) \gset
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[3070], lease => interval '1 millisecond', max_runs => 3)),
          3, 'max_runs: three runs claimed');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(cardinality(pg_temp.swept(max_runs => 2)), 2, 'max_runs: a sweep with max_runs 2 decides 2 runs');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE run_id IN (:m1, :m2, :m3) AND status = 'running'), 1,
          'max_runs: the third is still running');
SELECT is(cardinality(pg_temp.swept(max_runs => 1)), 1, 'max_runs: the next sweep decides it');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE run_id IN (:m1, :m2, :m3) AND status = 'queued'), 3,
          'max_runs: each was decided once: all three queued');
SELECT is((SELECT count(*)::int FROM runq.run_events e WHERE e.run_id IN (:m1, :m2, :m3)
              AND e.type = 'run.requeued'), 3,
          'max_runs: one run.requeued each');
SELECT is(pg_temp.swept(), '{}'::text[], 'max_runs: nothing left to sweep');

SELECT * FROM finish();
ROLLBACK;
