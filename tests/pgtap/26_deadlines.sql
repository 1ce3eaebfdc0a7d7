-- Deadlines (v0.2): submit's timeout gives the run deadline = created_at +
-- timeout, shown by get_run and claim. runq.sweep fails every non-terminal
-- run past its deadline -- queued, running under a live lease, waiting for the
-- user, and a lease that expired (not requeued, not dead-lettered, not
-- orphaned) -- with code deadline_exceeded and action deadline_exceeded, a
-- cancel flag first (cancelled), the deadline before queue_ttl, a pause
-- stopping nothing, all within max_runs. heartbeat, heartbeat_many,
-- checkpoint, begin_turn, begin_tool and ask_user by the holder past the
-- deadline fail the run in that statement and return false, without applying
-- (a cancel flag first: cancelled); complete, fail, end_tool and record_usage
-- still apply until the sweep; release fails it and returns true. Started tool
-- calls are resolved as on requeue. A redrive of a deadline_exceeded run opens
-- a fresh window (deadline = now() + timeout), a redrive of another failure
-- keeps the deadline; a run without a timeout is never touched. A deadline is
-- put in the past by moving the run's created_at and deadline back two days
-- (pg_temp.overdue), or, once, by a 50 ms timeout and a nap: the functions
-- read the clock, so time moves inside this transaction. Every scenario has
-- its own class (26xx) and is decided before the next begins, so a sweep
-- returns exactly the runs named.
BEGIN;
SELECT plan(129);

\ir helpers/recovery.sql

-- A run of its own class, submitted with a timeout and claimed under epoch 1
-- with an hour's lease.
CREATE FUNCTION pg_temp.running(p_class int, p_timeout interval DEFAULT interval '1 hour',
                                p_session text DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
BEGIN
    SELECT s.run_id INTO v_run
      FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => p_class, session_id => p_session,
                       timeout => p_timeout) AS s;
    PERFORM FROM runq.claim(ARRAY[p_class], lease => interval '1 hour') AS c WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;
-- Put a run past its deadline: created (and so due) two days earlier.
CREATE PROCEDURE pg_temp.overdue(p_run bigint) LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runq.runs SET created_at = created_at - interval '2 days', deadline = deadline - interval '2 days'
     WHERE run_id = p_run AND deadline IS NOT NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % has no deadline', p_run;
    END IF;
END $$;
-- A deadline_exceeded failure checked whole: 'ok', or what is wrong with it.
-- It holds code, message, deadline, timeout, attempt, epoch and at, nothing
-- else; deadline and timeout are the run's, at is when it finished.
CREATE FUNCTION pg_temp.deadline_failure(p_run bigint, p_attempt int, p_epoch bigint) RETURNS text
    LANGUAGE sql AS $$
    SELECT coalesce(nullif(concat_ws(', ',
        CASE WHEN r.status::text <> 'failed' THEN 'status ' || r.status END,
        CASE WHEN r.failure ->> 'code' IS DISTINCT FROM 'deadline_exceeded'
             THEN 'code ' || coalesce(r.failure ->> 'code', 'NULL') END,
        CASE WHEN ARRAY(SELECT k FROM jsonb_object_keys(r.failure) AS k ORDER BY k)
                  IS DISTINCT FROM ARRAY['at', 'attempt', 'code', 'deadline', 'epoch', 'message', 'timeout']
             THEN 'keys ' || array_to_string(ARRAY(SELECT k FROM jsonb_object_keys(r.failure) AS k ORDER BY k), ' ') END,
        CASE WHEN (r.failure ->> 'deadline')::timestamptz IS DISTINCT FROM r.deadline
             THEN 'deadline ' || coalesce(r.failure ->> 'deadline', 'NULL') || ' not ' || r.deadline END,
        CASE WHEN (r.failure ->> 'timeout')::interval IS DISTINCT FROM r.timeout::interval
             THEN 'timeout ' || coalesce(r.failure ->> 'timeout', 'NULL') END,
        CASE WHEN r.failure ->> 'message' IS DISTINCT FROM
                  format('not finished by its deadline %s (timeout %s)', r.deadline, r.timeout::interval)
             THEN 'message ' || coalesce(r.failure ->> 'message', 'NULL') END,
        CASE WHEN (r.failure ->> 'attempt')::int IS DISTINCT FROM p_attempt
             THEN 'attempt ' || coalesce(r.failure ->> 'attempt', 'NULL') END,
        CASE WHEN (r.failure ->> 'epoch')::bigint IS DISTINCT FROM p_epoch
             THEN 'epoch ' || coalesce(r.failure ->> 'epoch', 'NULL') END,
        CASE WHEN (r.failure ->> 'at')::timestamptz IS DISTINCT FROM r.finished_at
             THEN 'at ' || coalesce(r.failure ->> 'at', 'NULL') END,
        CASE WHEN (SELECT e.payload FROM runq.run_events AS e
                    WHERE e.run_id = p_run AND e.type = 'run.failed' ORDER BY e.event_id DESC LIMIT 1)
                  IS DISTINCT FROM r.failure::jsonb
             THEN 'run.failed does not carry the failure' END), ''), 'ok')
      FROM runq.runs AS r WHERE r.run_id = p_run
$$;
-- One call and the events it appended to the run, sorted: its answer, then
-- ' + <type>@<epoch>' for each.
CREATE FUNCTION pg_temp.answer(p_call text, p_run bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_last   bigint := (SELECT coalesce(max(e.event_id), 0) FROM runq.run_events AS e WHERE e.run_id = p_run);
    v_answer text;
BEGIN
    EXECUTE p_call INTO v_answer;
    RETURN coalesce(v_answer, 'NULL')
        || coalesce((SELECT string_agg(' + ' || e.type || '@' || e.epoch, '' ORDER BY e.type, e.epoch)
                       FROM runq.run_events AS e WHERE e.run_id = p_run AND e.event_id > v_last), '');
END $$;
-- A run's tool calls as 'call_id:status', by call_id.
CREATE FUNCTION pg_temp.calls_of(bigint) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(t.call_id || ':' || t.status, ' ' ORDER BY t.call_id), '')
      FROM runq.tool_calls($1) AS t
$$;

-- ---------------------------------------------------------------------------
-- deadline = created_at + timeout, in get_run and claim
-- ---------------------------------------------------------------------------
SELECT run_id AS d FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2600,
                                    timeout => interval '90 minutes') \gset
SELECT is((SELECT deadline - created_at FROM runq.get_run(:d)), interval '90 minutes',
          'get_run: the deadline is created_at + timeout');
SELECT deadline AS d_deadline FROM runq.get_run(:d) \gset
CREATE TEMP TABLE claim_d ON COMMIT DROP AS SELECT * FROM runq.claim(ARRAY[2600], lease => interval '1 hour');
SELECT results_eq('SELECT run_id, epoch, deadline, budget, usage FROM claim_d',
                  format($$VALUES (%s::bigint, 1::bigint, %L::timestamptz, NULL::jsonb, '{}'::jsonb)$$, :d, :'d_deadline'),
                  'claim: shows the same deadline (and no budget, usage {})');
SELECT ok((SELECT deadline > lease_expires_at - interval '1 hour' FROM claim_d), 'the deadline is ahead of the claim');
SELECT is(runq.complete(:d, 1), true, '(the run completes in time)');
SELECT is((SELECT deadline FROM runq.get_run(:d)), :'d_deadline'::timestamptz, 'a finished run keeps its deadline');
SELECT run_id AS d0 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2601) \gset
SELECT is((SELECT deadline FROM runq.get_run(:d0)), NULL::timestamptz, 'get_run: no timeout, no deadline');
SELECT is((SELECT deadline FROM runq.claim(ARRAY[2601], lease => interval '1 hour')), NULL::timestamptz,
          'claim: no timeout, no deadline');
SELECT is(runq.complete(:d0, 1), true, '(that run completes too)');

-- ---------------------------------------------------------------------------
-- sweep: a queued run past its deadline; a run not yet due and a run without
-- a timeout are left alone
-- ---------------------------------------------------------------------------
SELECT run_id AS q FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2610, timeout => interval '1 hour') \gset
SELECT run_id AS q_due FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2611, timeout => interval '1 hour') \gset
SELECT run_id AS q_none FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2612) \gset
UPDATE runq.runs SET created_at = created_at - interval '10 years' WHERE run_id = :q_none;  -- fixture: ten years old
CALL pg_temp.overdue(:q);
SET ROLE runq_worker;
SELECT is(pg_temp.swept(), ARRAY[:q || ':deadline_exceeded'],
          'queued: the sweep (as runq_worker) fails the queued run past its deadline, action deadline_exceeded');
RESET ROLE;
SELECT is(pg_temp.deadline_failure(:q, 0, 0), 'ok',
          'queued: failed, deadline_exceeded naming deadline and timeout, attempt 0, epoch 0; run.failed carries it');
SELECT is((SELECT failure ->> 'message' FROM runq.get_run(:q)),
          (SELECT format('not finished by its deadline %s (timeout 01:00:00)', deadline) FROM runq.get_run(:q)),
          'queued: the message names the deadline and the timeout');
SELECT ok(pg_temp.failure_complete(:q), 'queued: the failure has code, message, attempt, epoch and at');
SELECT is(pg_temp.events(:q), ARRAY['run.created@0', 'run.failed@0'], 'queued: events created, failed (epoch 0)');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[2610])', 'queued: the failed run is not claimable');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s) UNION ALL SELECT status, failure FROM runq.get_run(%s)',
                         :q_due, :q_none),
                  $$VALUES ('queued'::text, NULL::jsonb), ('queued', NULL)$$,
                  'a run whose deadline is ahead, and one without a timeout queued ten years, are still queued');

-- ---------------------------------------------------------------------------
-- sweep: a running run under a live lease, its tool calls resolved
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2620) AS r \gset
SELECT is(runq.begin_tool(:r, 1, 'c-read', 'search', 'read_only')
          AND runq.begin_tool(:r, 1, 'c-idem', 'upsert', 'idempotent')
          AND runq.begin_tool(:r, 1, 'c-pay', 'pay', 'non_idempotent')
          AND runq.begin_tool(:r, 1, 'c-done', 'search', 'read_only')
          AND runq.end_tool(:r, 1, 'c-done', '{"hits": 1}'), true,
          'running: three tool calls left started, a fourth finished');
CALL pg_temp.overdue(:r);
SELECT ok((SELECT lease_expires_at > clock_timestamp() FROM runq.runs WHERE run_id = :r), 'running: the lease is live');
SELECT is(pg_temp.swept(), ARRAY[:r || ':deadline_exceeded'], 'running: the sweep fails it: deadline_exceeded');
SELECT is(pg_temp.deadline_failure(:r, 1, 1), 'ok', 'running: failed deadline_exceeded, attempt 1, epoch 1');
SELECT is(pg_temp.calls_of(:r), 'c-done:finished c-idem:retryable c-pay:uncertain c-read:retryable',
          'running: started calls resolved as on requeue; the finished one stays');
SELECT is(ARRAY(SELECT x FROM unnest(pg_temp.events(:r)) AS x WHERE x NOT LIKE 'run.tool_started%' ORDER BY x),
          ARRAY['run.claimed@1', 'run.created@0', 'run.failed@1', 'run.tool_finished@1', 'run.tool_uncertain@1'],
          'running: one run.tool_uncertain and run.failed, both under epoch 1; no run.requeued');
SELECT is(runq.heartbeat(:r, 1), false, 'running: the worker''s next heartbeat is fenced: false');

-- ---------------------------------------------------------------------------
-- sweep: a run waiting for the user; its session is free again
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2630, p_session => 'dl-w') AS w \gset
SELECT is(runq.ask_user(:w, 1, '{"q": "which?"}'), true, 'waiting: the run asks the user');
CALL pg_temp.overdue(:w);
SELECT is(pg_temp.swept(), ARRAY[:w || ':deadline_exceeded'], 'waiting: the sweep fails it: deadline_exceeded');
SELECT is(pg_temp.deadline_failure(:w, 1, 1), 'ok', 'waiting: failed deadline_exceeded, attempt 1, epoch 1');
SELECT is((SELECT question FROM runq.get_run(:w)), NULL::jsonb, 'waiting: the question is gone');
SELECT is((SELECT outcome FROM runq.submit(tenant_id => 'dl', kind => 'k', session_id => 'dl-w', priority => 2631,
                                           payload => '{"answer": "this"}')),
          'created', 'waiting: a submit to its session creates a run: nothing waits for the input any more');

-- ---------------------------------------------------------------------------
-- sweep: an expired lease past its deadline fails, whatever the lease rules say
-- ---------------------------------------------------------------------------
SELECT run_id AS x1 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2640, timeout => interval '1 hour',
                                     max_attempts => 1, recovery_policy => 'fail') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[2640], lease => interval '1 millisecond') \gset
SELECT run_id AS x2 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2641, timeout => interval '1 hour') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[2641], lease => interval '1 millisecond') \gset
SELECT is(runq.begin_tool(:x2, 1, 'c-pay', 'pay', 'non_idempotent'), true, 'expired: x2 starts a non_idempotent call');
CALL pg_temp.overdue(:x1);
CALL pg_temp.overdue(:x2);
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:x1 || ':deadline_exceeded', :x2 || ':deadline_exceeded'],
          'expired: both fail deadline_exceeded: x1 not dead_lettered (attempts used) nor orphaned (policy fail), '
          'x2 (resume) not requeued');
SELECT is(pg_temp.deadline_failure(:x1, 1, 1), 'ok', 'expired: x1 failed deadline_exceeded, attempt 1, epoch 1');
SELECT is(pg_temp.deadline_failure(:x2, 1, 1), 'ok', 'expired: x2 failed deadline_exceeded, attempt 1, epoch 1');
SELECT is((SELECT count(*)::int FROM runq.run_events WHERE run_id IN (:x1, :x2) AND type = 'run.requeued'), 0,
          'expired: neither was requeued');
SELECT is(pg_temp.calls_of(:x2), 'c-pay:uncertain', 'expired: x2''s started call is uncertain');

-- ---------------------------------------------------------------------------
-- sweep: a cancel flag comes first
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2650) AS k1 \gset
SELECT run_id AS k2 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2651, timeout => interval '1 hour') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[2651], lease => interval '1 millisecond') \gset
SELECT is(runq.cancel(:k1) || ' ' || runq.cancel(:k2), 'cancel_requested cancel_requested', 'cancel: both flagged');
CALL pg_temp.overdue(:k1);
CALL pg_temp.overdue(:k2);
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:k1 || ':cancelled', :k2 || ':cancelled'],
          'cancel: a live lease and an expired one, both past the deadline, are cancelled');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s) UNION ALL SELECT status, failure FROM runq.get_run(%s)',
                         :k1, :k2),
                  $$VALUES ('cancelled'::text, NULL::jsonb), ('cancelled', NULL)$$, 'cancel: cancelled, no failure');

-- ---------------------------------------------------------------------------
-- sweep: the deadline before queue_ttl; a pause stops no deadline; max_runs
-- ---------------------------------------------------------------------------
SELECT run_id AS t FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2688, timeout => interval '1 hour',
                                    queue_ttl => interval '1 millisecond') \gset
CALL pg_temp.overdue(:t);
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:t || ':deadline_exceeded'],
          'queue_ttl: a queued run past both its deadline and its queue_ttl fails deadline_exceeded');
SELECT run_id AS p FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2689, timeout => interval '1 hour') \gset
SELECT is(runq.pause('class', '2689', 'maintenance'), true, 'pause: the class is paused');
CALL pg_temp.overdue(:p);
SELECT is(pg_temp.swept(), ARRAY[:p || ':deadline_exceeded'], 'pause: a paused queued run past its deadline still fails');
SELECT is(runq.resume('class', '2689'), true, '(the class is resumed)');
SELECT run_id AS m1 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2698, timeout => interval '1 hour') \gset
SELECT run_id AS m2 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2698, timeout => interval '1 hour') \gset
SELECT run_id AS m3 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2698, timeout => interval '1 hour') \gset
CALL pg_temp.overdue(:m1);
CALL pg_temp.overdue(:m2);
CALL pg_temp.overdue(:m3);
SELECT is(cardinality(pg_temp.swept(max_runs => 2)), 2, 'max_runs: a sweep with max_runs 2 fails two');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE run_id IN (:m1, :m2, :m3) AND status = 'queued'), 1,
          'max_runs: the third is still queued');
SELECT is(cardinality(pg_temp.swept()), 1, 'max_runs: the next sweep fails it');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE run_id IN (:m1, :m2, :m3) AND status = 'failed'
              AND failure ->> 'code' = 'deadline_exceeded'), 3, 'max_runs: all three failed deadline_exceeded, once each');

-- ---------------------------------------------------------------------------
-- The holder's loop writes past the deadline fail the run and return false
-- (a cancel flag first: cancelled); the write does not apply
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE calls (n integer, fn text, call text) ON COMMIT DROP;
INSERT INTO calls VALUES
    (1, 'heartbeat',      'SELECT runq.heartbeat(%1$s, 1)'),
    (2, 'heartbeat_many', 'SELECT alive FROM runq.heartbeat_many(ARRAY[%1$s]::bigint[], ARRAY[1]::bigint[])'),
    (3, 'checkpoint',     $$SELECT runq.checkpoint(%1$s, 1, '{"step": "late"}')$$),
    (4, 'begin_turn',     'SELECT runq.begin_turn(%1$s, 1)'),
    (5, 'begin_tool',     $$SELECT runq.begin_tool(%1$s, 1, 'late-call', 'search', 'read_only')$$),
    (6, 'ask_user',       $$SELECT runq.ask_user(%1$s, 1, '{"q": "late"}')$$);
-- Each call on a fresh run of class p_base + n that started a non_idempotent
-- call and is past its deadline (and, p_cancel, cancel-requested). 3 tests a call.
CREATE FUNCTION pg_temp.past_deadline(p_base int, p_cancel boolean) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    c      record;
    v_run  bigint;
    v_what text := CASE WHEN p_cancel THEN 'cancel-requested and past its deadline' ELSE 'past its deadline' END;
BEGIN
    FOR c IN SELECT * FROM pg_temp.calls ORDER BY n LOOP
        v_run := pg_temp.running(p_base + c.n);
        PERFORM runq.begin_tool(v_run, 1, 'pay', 'card', 'non_idempotent');
        IF p_cancel THEN
            PERFORM runq.cancel(v_run);
        END IF;
        CALL pg_temp.overdue(v_run);
        RETURN NEXT is(pg_temp.answer(format(c.call, v_run), v_run),
                       CASE WHEN p_cancel THEN 'false + run.cancelled@1 + run.tool_uncertain@1'
                            ELSE 'false + run.failed@1 + run.tool_uncertain@1' END,
                       format('%s on a run %s: false, %s and its started call uncertain, in that statement',
                              c.fn, v_what, CASE WHEN p_cancel THEN 'run.cancelled' ELSE 'run.failed' END));
        RETURN NEXT is(CASE WHEN p_cancel THEN (SELECT r.status || ' ' || coalesce(r.failure::text, 'no failure')
                                                  FROM runq.get_run(v_run) AS r)
                            ELSE pg_temp.deadline_failure(v_run, 1, 1) END,
                       CASE WHEN p_cancel THEN 'cancelled no failure' ELSE 'ok' END,
                       format('%s on a run %s: %s', c.fn, v_what,
                              CASE WHEN p_cancel THEN 'cancelled, no failure'
                                   ELSE 'failed deadline_exceeded, attempt 1, epoch 1' END));
        RETURN NEXT is((SELECT format('%s checkpoints, %s turns, calls %s, question %s',
                                      (SELECT count(*) FROM runq.checkpoints AS k WHERE k.run_id = v_run),
                                      (SELECT x.turns FROM runq.runs AS x WHERE x.run_id = v_run),
                                      pg_temp.calls_of(v_run), coalesce(g.question::text, 'NULL'))
                          FROM runq.get_run(v_run) AS g),
                       '0 checkpoints, 0 turns, calls pay:uncertain, question NULL',
                       format('%s on a run %s: the write itself did not apply', c.fn, v_what));
    END LOOP;
END $$;
SELECT pg_temp.past_deadline(2660, false);
SELECT pg_temp.past_deadline(2670, true);

-- A batch: only the element past its deadline fails; rows in input order.
SELECT pg_temp.running(2685) AS b1 \gset
SELECT pg_temp.running(2686) AS b2 \gset
SELECT pg_temp.running(2687, NULL) AS b3 \gset
CALL pg_temp.overdue(:b2);
SELECT results_eq(format('SELECT run_id, alive FROM runq.heartbeat_many(ARRAY[%s, %s, %s]::bigint[], ARRAY[1, 1, 1]::bigint[])',
                         :b1, :b2, :b3),
                  format('VALUES (%s::bigint, true), (%s, false), (%s, true)', :b1, :b2, :b3),
                  'heartbeat_many: the element past its deadline is false, the others alive, in input order');
SELECT is((SELECT string_agg(status, ' ' ORDER BY o.n) FROM unnest(ARRAY[:b1, :b2, :b3]::bigint[]) WITH ORDINALITY AS o (id, n),
                  LATERAL runq.get_run(o.id)),
          'running failed running', 'heartbeat_many: only that run failed');
SELECT is(pg_temp.deadline_failure(:b2, 1, 1), 'ok', 'heartbeat_many: deadline_exceeded, attempt 1, epoch 1');
SELECT is(runq.complete(:b1, 1) AND runq.complete(:b3, 1), true, '(the two live runs complete)');

-- ---------------------------------------------------------------------------
-- complete, fail, end_tool and record_usage still apply past the deadline;
-- release fails the run and returns true
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2680) AS h1 \gset
CALL pg_temp.overdue(:h1);
SELECT is(runq.complete(:h1, 1, '{"late": true}'), true, 'complete past the deadline applies: true');
SELECT results_eq(format('SELECT status, result, failure FROM runq.get_run(%s)', :h1),
                  $$VALUES ('succeeded'::text, '{"late": true}'::jsonb, NULL::jsonb)$$, 'complete: the run succeeded');

SELECT pg_temp.running(2681) AS h2 \gset
CALL pg_temp.overdue(:h2);
SELECT is(runq.fail(:h2, 1, '{"code": "tool_error"}'), true, 'fail past the deadline applies: true');
SELECT is((SELECT status || ' ' || (failure ->> 'code') FROM runq.get_run(:h2)), 'failed tool_error',
          'fail: the worker''s failure stands');

SELECT pg_temp.running(2682) AS h3 \gset
SELECT is(runq.begin_tool(:h3, 1, 'c1', 'search', 'read_only'), true, 'end_tool case: a tool call begins');
CALL pg_temp.overdue(:h3);
SELECT is(runq.end_tool(:h3, 1, 'c1', '{"hits": 2}'), true, 'end_tool past the deadline applies: true');
SELECT is(runq.record_usage(:h3, 1, '{"tokens": 12}'), true, 'record_usage past the deadline applies: true');
SELECT results_eq(format('SELECT status, usage FROM runq.get_run(%s)', :h3),
                  $$VALUES ('running'::text, '{"tokens": 12}'::jsonb)$$, 'the run is still running, its usage recorded');
SELECT is(pg_temp.calls_of(:h3), 'c1:finished', 'end_tool: the call finished');
SELECT is(pg_temp.swept(), ARRAY[:h3 || ':deadline_exceeded'], 'until the sweep fails it');
SELECT is(runq.record_usage(:h3, 1, '{"tokens": 1}'), false, 'record_usage after that still records, answering false');
SELECT is((SELECT usage FROM runq.get_run(:h3)), '{"tokens": 13}'::jsonb, 'the late usage is in the totals');

SELECT pg_temp.running(2690) AS l1 \gset
SELECT is(runq.begin_tool(:l1, 1, 'c-pay', 'pay', 'non_idempotent')
          AND runq.begin_tool(:l1, 1, 'c-idem', 'upsert', 'idempotent'), true, 'release: two tool calls started');
CALL pg_temp.overdue(:l1);
SELECT is(runq.release(:l1, 1), true, 'release past the deadline returns true');
SELECT is(pg_temp.deadline_failure(:l1, 1, 1), 'ok', 'release: failed deadline_exceeded, attempt 1, epoch 1');
SELECT is(pg_temp.calls_of(:l1), 'c-idem:retryable c-pay:uncertain', 'release: started calls resolved');
SELECT is((SELECT count(*)::int FROM runq.run_events(:l1) WHERE type = 'run.requeued'), 0, 'release: not requeued');
SELECT is_empty('SELECT * FROM runq.claim(ARRAY[2690])', 'release: nothing to claim');

SELECT pg_temp.running(2691) AS l2 \gset
SELECT is(runq.cancel(:l2), 'cancel_requested', 'release, cancel flag: requested');
CALL pg_temp.overdue(:l2);
SELECT is(runq.release(:l2, 1), true, 'release, cancel flag: returns true');
SELECT results_eq(format('SELECT status, failure FROM runq.get_run(%s)', :l2),
                  $$VALUES ('cancelled'::text, NULL::jsonb)$$, 'release, cancel flag: cancelled, not failed');

-- ---------------------------------------------------------------------------
-- Time moves: a 50 ms timeout and a nap, no fixture
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2696, interval '50 milliseconds') AS n1 \gset
SELECT run_id AS n2 FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2697,
                                     timeout => interval '50 milliseconds') \gset
SELECT is(runq.heartbeat(:n1, 1), true, 'a 50 ms timeout: the heartbeat at once is alive');
DO $$ BEGIN PERFORM pg_sleep(0.1); END $$;
SELECT is(runq.heartbeat(:n1, 1), false, 'a 50 ms timeout: after 100 ms the heartbeat returns false');
SELECT is((SELECT failure ->> 'code' FROM runq.get_run(:n1)), 'deadline_exceeded', 'and the run failed deadline_exceeded');
SELECT is(pg_temp.swept(), ARRAY[:n2 || ':deadline_exceeded'], 'and the sweep fails the queued one');

-- ---------------------------------------------------------------------------
-- redrive: a deadline_exceeded run, or one whose deadline passed, gets a fresh
-- window; a run failed otherwise before its deadline keeps it
-- ---------------------------------------------------------------------------
SELECT is(runq.redrive(:q, 'more time'), true, 'redrive of the deadline_exceeded queued run');
SELECT ok((SELECT deadline BETWEEN now() + interval '1 hour' AND clock_timestamp() + interval '1 hour'
             FROM runq.get_run(:q)),
          'redrive: deadline = the redrive''s time + timeout');
SELECT deadline AS q_deadline FROM runq.get_run(:q) \gset
SELECT is(pg_temp.swept(), '{}'::text[], 'redrive: the fresh window is not past: nothing to sweep');
SELECT results_eq('SELECT run_id, deadline FROM runq.claim(ARRAY[2610], lease => interval ''1 hour'')',
                  format('VALUES (%s::bigint, %L::timestamptz)', :q, :'q_deadline'),
                  'redrive: the next claim shows the new deadline');
SELECT is(runq.heartbeat(:q, 1), true, 'redrive: and its heartbeat is alive');
SELECT is(runq.complete(:q, 1), true, '(it completes)');

SELECT is(runq.redrive(:h2), true, 'redrive of the run the worker failed (tool_error) past its deadline');
SELECT ok((SELECT deadline BETWEEN now() + interval '1 hour' AND clock_timestamp() + interval '1 hour'
             FROM runq.get_run(:h2)),
          'redrive: a deadline already past opens a fresh window too');
SELECT is(pg_temp.swept(), '{}'::text[], 'redrive: so the next sweep does not fail it at once');
SELECT is(runq.cancel(:h2), 'cancelled', '(it is cancelled)');

-- A run the sweep dead-lettered, its deadline ahead: redrive keeps it.
SELECT run_id AS y FROM runq.submit(tenant_id => 'dl', kind => 'k', priority => 2699, timeout => interval '1 day',
                                    max_attempts => 1) \gset
SELECT deadline AS y_deadline FROM runq.get_run(:y) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[2699], lease => interval '1 millisecond') \gset
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT is(pg_temp.swept(), ARRAY[:y || ':dead_lettered'], 'dead-lettered before its deadline');
SELECT is(runq.redrive(:y), true, 'redrive of the dead-lettered run');
SELECT is((SELECT deadline FROM runq.get_run(:y)), :'y_deadline'::timestamptz,
          'redrive of a max_attempts_exceeded run keeps the deadline');

-- ---------------------------------------------------------------------------
-- A run without a timeout is never touched
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2693, NULL) AS z \gset
UPDATE runq.runs SET created_at = created_at - interval '10 years' WHERE run_id = :z;  -- fixture: ten years old
SELECT is(runq.heartbeat(:z, 1) AND runq.checkpoint(:z, 1, '{"step": 1}') AND runq.begin_turn(:z, 1)
          AND runq.begin_tool(:z, 1, 'c1', 'search', 'read_only') AND runq.end_tool(:z, 1, 'c1', '{}'), true,
          'no timeout: every write of a ten-year-old run applies');
SELECT is(pg_temp.swept(), '{}'::text[], 'no timeout: the sweep leaves it, and the ten-year-old queued run, alone');
SELECT is(runq.release(:z, 1), true, 'no timeout: a release');
SELECT results_eq(format('SELECT status, deadline, failure FROM runq.get_run(%s)', :z),
                  $$VALUES ('queued'::text, NULL::timestamptz, NULL::jsonb)$$, 'no timeout: requeues it, as in v0.1');

-- ---------------------------------------------------------------------------
-- Under a limit: an admitted run that misses its deadline hands its slot to
-- the parked one, after the sweep's statement, which fails that one too if
-- it is also late (a hand-on inside the statement raised 27000 once)
-- ---------------------------------------------------------------------------
SELECT runq.set_limit('tenant', 'dl-limit', 1);
SELECT run_id AS la FROM runq.submit(tenant_id => 'dl-limit', kind => 'k', priority => 2698,
                                     timeout => interval '1 millisecond') \gset
SELECT run_id AS lb FROM runq.submit(tenant_id => 'dl-limit', kind => 'k', priority => 2698,
                                     timeout => interval '1 millisecond') \gset
SELECT run_id AS lc FROM runq.submit(tenant_id => 'dl-limit', kind => 'k', priority => 2698) \gset
SELECT results_eq(format('SELECT run_id, parked FROM runq.runs WHERE run_id IN (%s, %s, %s) ORDER BY run_id', :la, :lb, :lc),
                  format('VALUES (%s::bigint, false), (%s, true), (%s, true)', :la, :lb, :lc),
                  'limit 1: the first is admitted, the other two parked');
DO $$ BEGIN PERFORM pg_sleep(0.005); END $$;
SELECT lives_ok('SELECT runq.sweep()', 'the sweep fails an admitted and a parked late run of a limited tenant');
SELECT results_eq(format('SELECT run_id, status::text, parked FROM runq.runs WHERE run_id IN (%s, %s, %s) ORDER BY run_id', :la, :lb, :lc),
                  format($$VALUES (%s::bigint, 'failed', false), (%s, 'failed', true), (%s, 'queued', false)$$, :la, :lb, :lc),
                  'both late runs failed; the slot went to the run without a deadline');

SELECT * FROM finish();
ROLLBACK;
