-- Claim order: lowest class first, then oldest; classes not asked
-- for and runs scheduled in the future are skipped; zero rows when nothing is
-- ready; max_runs is honoured. Classes 1200..1299 belong to this file.
BEGIN;
SELECT plan(26);

SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1200, 1210, 1220, 1230])), 0,
          'claim on empty classes returns zero rows');

-- Submitted in this order: a(1210) b(1200) c(1210) d(1220) e(1200, in an hour) f(1230) g(1200, scheduled for the moment of its submit)
SELECT run_id AS a FROM runq.submit(tenant_id => 'order', kind => 'a', priority => 1210) \gset
SELECT run_id AS b FROM runq.submit(tenant_id => 'order', kind => 'b', priority => 1200) \gset
SELECT run_id AS c FROM runq.submit(tenant_id => 'order', kind => 'c', priority => 1210) \gset
SELECT run_id AS d FROM runq.submit(tenant_id => 'order', kind => 'd', priority => 1220) \gset
SELECT run_id AS e FROM runq.submit(tenant_id => 'order', kind => 'e', priority => 1200,
                                    scheduled_for => now() + interval '1 hour') \gset
SELECT run_id AS f FROM runq.submit(tenant_id => 'order', kind => 'f', priority => 1230) \gset
SELECT run_id AS g FROM runq.submit(tenant_id => 'order', kind => 'g', priority => 1200,
                                    scheduled_for => clock_timestamp()) \gset

SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1299])), 0,
          'claim of a class with no runs returns zero rows while other classes have work');

-- One run per claim: the order is class, then age.
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1200, 1210, 1220])), :b::bigint,
          'the lowest class first, though younger than a run of a higher class');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1220, 1210, 1200])), :g::bigint,
          'a run scheduled in the past is ready; the order of the classes array does not matter');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1200, 1210, 1220])), :a::bigint,
          'class 1200 has nothing ready (e is in the future): the oldest run of the next class');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1200, 1210, 1220])), :c::bigint,
          'then the next oldest of that class');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1200, 1210, 1220])), :d::bigint,
          'then the next class');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1200, 1210, 1220])), 0,
          'zero rows: the remaining runs are in the future or in classes not asked for');
SELECT results_eq(format('SELECT status FROM runq.get_run(%s) UNION ALL SELECT status FROM runq.get_run(%s)', :e, :f),
                  $$VALUES ('queued'::text), ('queued')$$,
                  'the scheduled run and the run of the class not asked for are still queued');
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1230])), :f::bigint,
          'the class not asked for is claimed when asked for');

-- Claiming changes status, attempt and epoch of exactly the claimed runs.
SELECT results_eq(
    format($$SELECT status::text, attempts::int, lease_epoch::bigint FROM runq.runs
              WHERE run_id IN (%s, %s, %s, %s, %s, %s) ORDER BY run_id$$, :a, :b, :c, :d, :f, :g),
    $$VALUES ('running'::text, 1, 1::bigint), ('running', 1, 1), ('running', 1, 1),
             ('running', 1, 1), ('running', 1, 1), ('running', 1, 1)$$,
    'every claimed run is running with attempt 1 and epoch 1');

-- A run scheduled a moment ahead becomes claimable when its time comes
-- (the database clock decides, not the transaction start).
SELECT run_id AS h FROM runq.submit(tenant_id => 'order', kind => 'h', priority => 1240,
                                    scheduled_for => clock_timestamp() + interval '50 milliseconds') \gset
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1240])), 0, 'not ready before its scheduled time');
DO $$ BEGIN PERFORM pg_sleep(0.1); END $$;
SELECT is((SELECT run_id FROM runq.claim(ARRAY[1240])), :h::bigint, 'ready once its scheduled time has passed');

-- ---------------------------------------------------------------------------
-- max_runs
-- ---------------------------------------------------------------------------
SELECT run_id AS m1 FROM runq.submit(tenant_id => 'order', kind => 'm', priority => 1251) \gset
SELECT run_id AS m2 FROM runq.submit(tenant_id => 'order', kind => 'm', priority => 1250) \gset
SELECT run_id AS m3 FROM runq.submit(tenant_id => 'order', kind => 'm', priority => 1250) \gset
SELECT run_id AS m4 FROM runq.submit(tenant_id => 'order', kind => 'm', priority => 1251) \gset
SELECT run_id AS m5 FROM runq.submit(tenant_id => 'order', kind => 'm', priority => 1250) \gset

CREATE TEMP TABLE batch1 ON COMMIT DROP AS
SELECT * FROM runq.claim(ARRAY[1250, 1251], worker_id => 'w-batch', max_runs => 3);
SELECT is((SELECT count(*)::int FROM batch1), 3, 'max_runs => 3 claims three runs');
SELECT is((SELECT array_agg(run_id ORDER BY run_id) FROM batch1),
          ARRAY[:m2, :m3, :m5]::bigint[], 'the three are the lowest class, oldest first');
SELECT is((SELECT array_agg(DISTINCT epoch) FROM batch1), ARRAY[1]::bigint[],
          'each run of the batch gets its own epoch 1');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE run_id IN (:m2, :m3, :m5) AND lease_owner = 'w-batch'),
          3, 'the whole batch is leased to the claiming worker');

CREATE TEMP TABLE batch2 ON COMMIT DROP AS
SELECT * FROM runq.claim(ARRAY[1250, 1251], max_runs => 10);
SELECT is((SELECT array_agg(run_id ORDER BY run_id) FROM batch2),
          ARRAY[:m1, :m4]::bigint[], 'max_runs larger than the backlog claims what is ready');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1250, 1251], max_runs => 10)), 0,
          'and then nothing is left');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1250, 1251])), 0,
          'max_runs defaults to 1 (nothing left either way)');

SELECT run_id AS n1 FROM runq.submit(tenant_id => 'order', kind => 'n', priority => 1260) \gset
SELECT run_id AS n2 FROM runq.submit(tenant_id => 'order', kind => 'n', priority => 1260) \gset
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1260])), 1, 'without max_runs one run is claimed');
SELECT is((SELECT status FROM runq.get_run(:n2)), 'queued', 'the younger run stays queued');

-- Terminal and waiting runs are never claimed.
SELECT is(runq.ask_user(:n1, 1, '{"q": 1}'), true, 'the claimed run asks the user');
SELECT is(runq.cancel(:n2), 'cancelled', 'the queued run is cancelled');
SELECT is((SELECT count(*)::int FROM runq.claim(ARRAY[1260], max_runs => 10)), 0,
          'neither a waiting nor a cancelled run is claimed');

-- The class range ends are classes like any other.
SELECT run_id AS lo FROM runq.submit(tenant_id => 'order', kind => 'lo', priority => 0) \gset
SELECT run_id AS hi FROM runq.submit(tenant_id => 'order', kind => 'hi', priority => 32767) \gset
SELECT is((SELECT array_agg(run_id ORDER BY priority) FROM runq.claim(ARRAY[32767, 0], max_runs => 2)),
          ARRAY[:lo, :hi]::bigint[], 'classes 0 and 32767 are submitted and claimed');

SELECT * FROM finish();
ROLLBACK;
