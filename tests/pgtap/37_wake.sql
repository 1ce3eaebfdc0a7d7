-- A new run's NOTIFY runq only while a worker may be idle
-- (deploy/wake_idle.sql). The deferred trigger runs_wake fires for a run
-- inserted claimable now: a submit ready now (or due already); never for a
-- submit scheduled later or parked, nor for an update (a claim, a heartbeat,
-- a complete, a fail; deliver_input, redrive and resume, which requeue a run
-- and send their NOTIFY in every case, as tests/test_concurrency_submit.py
-- shows). When it fires it holds the wake lock shared until the
-- transaction ends, whatever it then decides. runq._mark_idle sets the idle
-- mark at most once a second and leaves no lock behind; a claim that comes
-- back short calls it, a full one does not. Whether the NOTIFY is sent (the
-- mark within the last minute) is seen only after a commit:
-- tests/test_wake.py. Classes 3700..3799; tenants wk-*.
BEGIN;
SELECT plan(28);

-- The check fires at commit, and this file never commits: each action runs
-- with runs_wake immediate, in a subtransaction that is then rolled back,
-- and the answer is whether the wake lock was taken.
CREATE FUNCTION pg_temp.wake_locked() RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT FROM pg_locks AS l
                    WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
                      AND l.mode = 'ShareLock' AND l.objsubid = 1
                      AND ((l.classid::bigint << 32) | l.objid::bigint) = runq._wake_lock())
$$;
CREATE FUNCTION pg_temp.wakes(p_sql text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_woke boolean;
BEGIN
    BEGIN
        SET CONSTRAINTS runq.runs_wake IMMEDIATE;
        EXECUTE p_sql;
        v_woke := pg_temp.wake_locked();
        RAISE EXCEPTION 'rolled back';
    EXCEPTION WHEN raise_exception THEN
    END;
    RETURN v_woke;
END
$$;
-- Fixtures: runs inserted with the triggers off, so that they leave no
-- wake-up pending (it would fire in the next check).
CREATE FUNCTION pg_temp.run(p_class integer, p_kind text DEFAULT 'wk-k') RETURNS bigint
    LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
BEGIN
    SET LOCAL session_replication_role = replica;
    SELECT s.run_id INTO v_run FROM runq.submit('wk-a', p_kind, priority => p_class) AS s;
    SET LOCAL session_replication_role = origin;
    RETURN v_run;
END
$$;
CREATE FUNCTION pg_temp.running(p_class integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint := pg_temp.run(p_class);
BEGIN
    PERFORM FROM runq.claim(ARRAY[p_class], 'w-wk', interval '1 hour') AS c
     WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;
CREATE FUNCTION pg_temp.mark() RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_sequence_last_value('runq.idle_mark')
$$;
CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- ---------------------------------------------------------------------------
-- The trigger
-- ---------------------------------------------------------------------------
SELECT trigger_is('runq', 'runs', 'runs_wake', 'runq', '_wake_idle',
                  'runs_wake calls runq._wake_idle');
SELECT ok((SELECT t.tgdeferrable AND t.tginitdeferred FROM pg_trigger AS t
            WHERE t.tgrelid = 'runq.runs'::regclass AND t.tgname = 'runs_wake'),
          'runs_wake is deferred to commit');
SELECT is(pg_temp.wakes('SELECT 1'), false, 'control: nothing pending, no wake lock');

-- ---------------------------------------------------------------------------
-- What fires it
-- ---------------------------------------------------------------------------
SELECT is(pg_temp.wakes($$SELECT runq.submit('wk-a', 'wk-k', priority => 3700)$$), true,
          'a submit ready now checks for an idle worker');
SELECT is(pg_temp.wakes($$SELECT runq.submit('wk-a', 'wk-k', priority => 3700,
                                             scheduled_for => now() + interval '1 hour')$$), false,
          'a submit scheduled for later does not');
SELECT is(pg_temp.wakes($$SELECT runq.submit('wk-a', 'wk-k', priority => 3700,
                                             scheduled_for => now() - interval '1 hour')$$), true,
          'a submit scheduled in the past does');

SELECT pg_temp.run(3701) AS queued \gset
SELECT is(pg_temp.wakes('SELECT * FROM runq.claim(ARRAY[3701], ''w-wk'')'), false,
          'a claim does not');
SELECT pg_temp.running(3702) AS held \gset
SELECT is(pg_temp.wakes(format('SELECT runq.heartbeat(%s, 1)', :held)), false, 'a heartbeat does not');
SELECT is(pg_temp.wakes(format('SELECT runq.complete(%s, 1)', :held)), false, 'a complete does not');
SELECT is(pg_temp.wakes(format('SELECT runq.fail(%s, 1, ''{"code": "x"}'')', :held)), false,
          'a fail does not');

SELECT pg_temp.running(3703) AS asking \gset
SELECT runq.ask_user(:asking, 1, '{"q": "which?"}');
SELECT is(pg_temp.wakes(format('SELECT runq.deliver_input(%s, ''{"a": 1}'')', :asking)), false,
          'input delivered to a waiting run does not: it requeues the run and notifies');

SELECT pg_temp.running(3704) AS failed \gset
SELECT runq.fail(:failed, 1, '{"code": "x"}');
SELECT is(pg_temp.wakes(format('SELECT runq.redrive(%s)', :failed)), false,
          'a redrive does not: it notifies');

SELECT runq.pause('kind', 'wk-paused');
SELECT is(pg_temp.wakes($$SELECT runq.submit('wk-a', 'wk-paused', priority => 3705)$$), false,
          'a submit a pause parks does not');
SELECT runq.submit('wk-a', 'wk-paused', priority => 3705);
SELECT is(pg_temp.wakes($$SELECT runq.resume('kind', 'wk-paused')$$), false,
          'nor the resume that admits the parked run: it notifies');

-- ---------------------------------------------------------------------------
-- The idle mark
-- ---------------------------------------------------------------------------
SELECT setval('runq.idle_mark', 1);
SELECT runq._mark_idle();
SELECT cmp_ok(pg_temp.now_ms() - pg_temp.mark(), '<', 1000::bigint, '_mark_idle sets the mark to now');
SELECT setval('runq.idle_mark', pg_temp.now_ms() - 500) AS recent \gset
SELECT runq._mark_idle();
SELECT is(pg_temp.mark(), :recent::bigint, 'and leaves a mark less than a second old as it is');
SELECT is(pg_temp.wake_locked(), false, 'and holds no wake lock after');
SELECT is((SELECT count(*) FROM pg_locks AS l
            WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
              AND ((l.classid::bigint << 32) | l.objid::bigint) = runq._wake_lock()), 0::bigint,
          'not even the exclusive one it waited with');

SELECT setval('runq.idle_mark', 1);
SELECT is((SELECT count(*) FROM runq.claim(ARRAY[3799], 'w-wk')), 0::bigint, 'a claim of an empty class');
SELECT cmp_ok(pg_temp.now_ms() - pg_temp.mark(), '<', 1000::bigint, 'marks the workers idle');

SELECT pg_temp.run(3706) AS one \gset
SELECT setval('runq.idle_mark', 1);
SELECT is((SELECT array_agg(c.run_id) FROM runq.claim(ARRAY[3706], 'w-wk') AS c), ARRAY[:one::bigint],
          'a claim that gets all it asked for');
SELECT is(pg_temp.mark(), 1::bigint, 'leaves the mark');

SELECT pg_temp.run(3707) AS two \gset
SELECT is((SELECT array_agg(c.run_id) FROM runq.claim(ARRAY[3707], 'w-wk', max_runs => 2) AS c),
          ARRAY[:two::bigint], 'a claim that gets fewer than it asked for');
SELECT cmp_ok(pg_temp.now_ms() - pg_temp.mark(), '<', 1000::bigint, 'marks them idle');

-- complete_and_claim's fast path (no kinds, no limit): a full claim leaves
-- the mark, a short one asks runq.claim for the rest, which marks.
SELECT pg_temp.running(3708) AS done1 \gset
SELECT pg_temp.run(3708) AS next1 \gset
SELECT setval('runq.idle_mark', 1);
SELECT is((SELECT array_agg(c.run_id) FROM runq.complete_and_claim(:done1, 1, NULL, ARRAY[3708], 'w-wk') AS c),
          ARRAY[:next1::bigint], 'complete_and_claim that gets the run it asked for');
SELECT is(pg_temp.mark(), 1::bigint, 'leaves the mark');
SELECT pg_temp.run(3708) AS next2 \gset
SELECT is((SELECT array_agg(c.run_id) FROM runq.complete_and_claim(:next1, 1, NULL, ARRAY[3708], 'w-wk',
                                                                    max_runs => 2) AS c),
          ARRAY[:next2::bigint], 'complete_and_claim that gets fewer than it asked for');
SELECT cmp_ok(pg_temp.now_ms() - pg_temp.mark(), '<', 1000::bigint, 'marks them idle');

SELECT * FROM finish();
ROLLBACK;
