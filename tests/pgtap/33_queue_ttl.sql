-- queue_ttl: the sweep fails a queued run older than its queue_ttl
-- (action expired, code queue_ttl_expired); a NULL queue_ttl never expires;
-- only queued runs expire; the expiry shares the sweep's max_runs; a
-- zero_work run whose lease expires past its queue_ttl is not requeued but
-- orphaned. Every scenario has its own priority class (33xx) and is decided
-- before the next begins.
BEGIN;
SELECT plan(32);

\ir helpers/recovery.sql

-- ---------------------------------------------------------------------------
-- A queued run past its queue_ttl expires; NULL and unexpired TTLs do not
-- ---------------------------------------------------------------------------
SELECT run_id AS r_x FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3300,
                                      queue_ttl => interval '1 millisecond') \gset
SELECT run_id AS r_null FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3301) \gset
SELECT run_id AS r_hour FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3302,
                                         queue_ttl => interval '1 hour') \gset
-- fixture: the run without a queue_ttl has been queued for ten years
UPDATE runq.runs SET created_at = created_at - interval '10 years' WHERE run_id = :r_null;
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;

SET ROLE runq_worker;
SELECT is(pg_temp.swept(), ARRAY[:r_x || ':expired'],
          'the sweep (as runq_worker) expires only the queued run past its queue_ttl');
RESET ROLE;
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r_x),
                  $$VALUES ('failed'::text, 'queue_ttl_expired'::text, 0, 0)$$,
                  'expired: failed, code queue_ttl_expired, attempt 0, epoch 0');
SELECT ok(pg_temp.failure_complete(:r_x), 'expired: the failure has code, message, attempt, epoch and at');
SELECT is(pg_temp.events(:r_x), ARRAY['run.created@0', 'run.failed@0'],
          'expired: events created, failed (epoch 0)');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[3300])', 'expired: the run is not claimable');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s)', :r_null),
                  $$VALUES ('queued'::text, NULL::jsonb)$$,
                  'a NULL queue_ttl never expires: queued for ten years and still queued');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s)', :r_hour),
                  $$VALUES ('queued'::text, NULL::jsonb)$$,
                  'a queue_ttl that has not passed: still queued');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[3301])), :r_null::bigint,
          'the ten-year-old run without a queue_ttl is still claimable');

-- ---------------------------------------------------------------------------
-- Only queued runs expire: running and waiting runs past their TTL do not
-- ---------------------------------------------------------------------------
SELECT run_id AS r_run FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3310,
                                        queue_ttl => interval '1 millisecond') \gset
SELECT epoch AS e_run FROM runq.claim(ARRAY[3310], lease => interval '1 hour') \gset
SELECT run_id AS r_wait FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3311,
                                         queue_ttl => interval '1 millisecond') \gset
SELECT epoch AS e_wait FROM runq.claim(ARRAY[3311], lease => interval '1 hour') \gset
SELECT is(runq.ask_user(:r_wait, :e_wait, '{"q": "sure?"}'), true, '(a run asks the user)');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), '{}'::text[], 'running and waiting_for_user runs past their queue_ttl do not expire');
SELECT is(ARRAY(SELECT status::text FROM runq.runs WHERE run_id IN (:r_run, :r_wait) ORDER BY run_id),
          ARRAY['running', 'waiting_for_user'], 'they keep their status');
SELECT is(runq.complete(:r_run, :e_run), true, '(the running run completes)');

-- ---------------------------------------------------------------------------
-- Expiry shares max_runs with the lease sweep
-- ---------------------------------------------------------------------------
SELECT run_id AS q1 FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3320,
                                     queue_ttl => interval '1 millisecond') \gset
SELECT run_id AS q2 FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3320,
                                     queue_ttl => interval '1 millisecond') \gset
SELECT run_id AS q3 FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3321) \gset
SELECT epoch AS e3 FROM runq.claim(ARRAY[3321], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(cardinality(pg_temp.swept(max_runs => 2)), 2,
          'max_runs 2 with one expired lease and two expired queued runs: two decided');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE run_id IN (:q1, :q2) AND status = 'queued'), 1,
          'one queued run past its queue_ttl is left for the next sweep');
SELECT is(cardinality(pg_temp.swept()), 1, 'the next sweep decides the last one');
SELECT is(ARRAY(SELECT failure ->> 'code' FROM runq.runs WHERE run_id IN (:q1, :q2) ORDER BY run_id),
          ARRAY['queue_ttl_expired', 'queue_ttl_expired'], 'both queued runs expired with queue_ttl_expired');
SELECT is((SELECT status FROM runq.get_run(:q3)), 'queued', 'the expired lease (no queue_ttl) was requeued');

-- ---------------------------------------------------------------------------
-- zero_work: a requeue past the queue_ttl is refused (orphaned); inside it the
-- run is requeued
-- ---------------------------------------------------------------------------
SELECT run_id AS r_zp FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3330,
                                       recovery_policy => 'zero_work',
                                       queue_ttl => interval '1 millisecond') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3330], lease => interval '1 millisecond') \gset
SELECT run_id AS r_zi FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3331,
                                       recovery_policy => 'zero_work',
                                       queue_ttl => interval '1 hour') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3331], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:r_zp || ':orphaned', :r_zi || ':requeued'],
          'zero_work without work: orphaned past its queue_ttl, requeued inside it');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r_zp),
                  $$VALUES ('failed'::text, 'orphaned'::text, 1, 1)$$,
                  'zero_work past its queue_ttl: failed, code orphaned, attempt 1, epoch 1');
SELECT ok(pg_temp.failure_complete(:r_zp), 'zero_work past its queue_ttl: the failure is complete');
SELECT is(pg_temp.events(:r_zp), ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1'],
          'zero_work past its queue_ttl: events created, claimed, failed (epoch 1)');
SELECT results_eq(format('SELECT status, scheduled_for FROM runq.get_run(%s)', :r_zi),
                  $$VALUES ('queued'::text, NULL::timestamptz)$$,
                  'zero_work inside its queue_ttl: queued, claimable at once');

-- The same refusal on release.
SELECT run_id AS r_zr FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3332,
                                       recovery_policy => 'zero_work',
                                       queue_ttl => interval '1 millisecond') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3332], lease => interval '1 hour') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(runq.release(:r_zr, :e), true, 'zero_work released past its queue_ttl: release returns true');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :r_zr),
                  $$VALUES ('failed'::text, 'orphaned'::text)$$,
                  'zero_work released past its queue_ttl: failed, code orphaned');

-- ---------------------------------------------------------------------------
-- resume: a lease that expires past the queue_ttl is requeued by the lease
-- rule, and then, queued past its queue_ttl, expires
-- ---------------------------------------------------------------------------
SELECT run_id AS r_rp FROM runq.submit(tenant_id => 'ttl', kind => 'k', priority => 3340,
                                       queue_ttl => interval '1 millisecond') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3340], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
CREATE TEMP TABLE swept_rp AS SELECT * FROM runq.sweep();
SELECT is(ARRAY(SELECT action FROM swept_rp WHERE run_id = :r_rp), ARRAY['requeued'],
          'resume past its queue_ttl: one sweep decides the run once (requeued)');
INSERT INTO swept_rp SELECT * FROM runq.sweep();
SELECT ok((SELECT bool_and(run_id = :r_rp) AND bool_or(action = 'expired') FROM swept_rp),
          'resume past its queue_ttl: the sweep reports it expired');
SELECT results_eq(format($$SELECT status, failure ->> 'code', (failure ->> 'attempt')::int,
                                  (failure ->> 'epoch')::int FROM runq.get_run(%s)$$, :r_rp),
                  $$VALUES ('failed'::text, 'queue_ttl_expired'::text, 1, 1)$$,
                  'resume past its queue_ttl: failed, code queue_ttl_expired, attempt 1, epoch 1');
SELECT is(pg_temp.events(:r_rp), ARRAY['run.created@0', 'run.claimed@1', 'run.requeued@1', 'run.failed@1'],
          'resume past its queue_ttl: events created, claimed, requeued, failed (epoch 1)');

-- A redriven run gets a fresh queue_ttl window: it does not expire again at once.
UPDATE runq.runs SET queue_ttl = interval '1 hour' WHERE run_id = :r_rp;  -- fixture: a real TTL
SELECT ok(runq.redrive(:r_rp), 'a queue_ttl_expired run can be redriven');
SELECT is(ARRAY(SELECT action FROM runq.sweep() WHERE run_id = :r_rp), ARRAY[]::text[],
          'the redriven run is inside a fresh queue_ttl window: the next sweep leaves it queued');

-- ---------------------------------------------------------------------------
-- Under a limit: the same for queue_ttl (a hand-on inside the sweep's
-- statement could admit a parked run that statement was about to expire)
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'ttl-limit', 1);
SELECT run_id AS la FROM runq.submit(tenant_id => 'ttl-limit', kind => 'k', priority => 3398,
                                     queue_ttl => interval '1 millisecond') \gset
SELECT run_id AS lb FROM runq.submit(tenant_id => 'ttl-limit', kind => 'k', priority => 3398,
                                     queue_ttl => interval '1 millisecond') \gset
SELECT run_id AS lc FROM runq.submit(tenant_id => 'ttl-limit', kind => 'k', priority => 3398) \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT lives_ok('SELECT runq.sweep()', 'the sweep expires an admitted and a parked run of a limited tenant');
SELECT results_eq(format('SELECT run_id, status::text, parked FROM runq.runs WHERE run_id IN (%s, %s, %s) ORDER BY run_id', :la, :lb, :lc),
                  format($$VALUES (%s::bigint, 'failed', false), (%s, 'failed', true), (%s, 'queued', false)$$, :la, :lb, :lc),
                  'both expired; the slot went to the run without a queue_ttl');

SELECT * FROM finish();
ROLLBACK;
