-- A run's output and its watchers. runq.emit appends chunks under the
-- worker's epoch, numbered 1, 2, 3, ... per run without gaps, logs no event
-- and leaves the run's row as it was; it is fenced as checkpoint and
-- begin_tool are (a stale epoch: false, nothing stored, one run.fenced per
-- run and epoch; an epoch the run never had: false and nothing logged; a
-- cancel flag: the run becomes cancelled; past the deadline: it fails with
-- deadline_exceeded), and checks its arguments first (22023, whoever calls).
-- Output of an earlier epoch stays when the run is claimed again.
-- runq.read_output reads chunks after a seq, in order, at most max_chunks.
-- runq.watch marks the run watched and records this session (pid and backend
-- start), answering as runq.get_run; runq.unwatch ends this session's watch
-- and clears the flag when no watch is left; runq._forget_watches (run by the
-- sweep) deletes the watches of sessions that ended. The notifications
-- themselves are never delivered inside this transaction (they are tested in
-- pytest): here, every transition of a watched run, which takes the notifying
-- path, still applies and logs as it does for a run nobody watches. Purge
-- takes a run's output and watches with it. Grants: who may emit, watch and
-- read. Classes 3800..3899; tenant 'wo'.
BEGIN;
SELECT plan(188);

\ir helpers/recovery.sql

-- A queued run of this file's class p_class; its id.
CREATE FUNCTION pg_temp.run(p_class integer, p_timeout interval DEFAULT NULL,
                            p_policy text DEFAULT 'resume') RETURNS bigint LANGUAGE sql AS $$
    SELECT s.run_id FROM runq.submit(tenant_id => 'wo', kind => 'k', priority => p_class,
                                     timeout => p_timeout, recovery_policy => p_policy) AS s
$$;
-- A run claimed under epoch 1 with an hour's lease.
CREATE FUNCTION pg_temp.running(p_class integer, p_timeout interval DEFAULT NULL,
                                p_policy text DEFAULT 'resume') RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint := pg_temp.run(p_class, p_timeout, p_policy);
BEGIN
    PERFORM FROM runq.claim(ARRAY[p_class], 'w-wo', interval '1 hour') AS c
     WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;
-- The output stored for a run, read from the table (not through
-- read_output), as 'seq@epoch chunk' in seq order.
CREATE FUNCTION pg_temp.output(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(o.seq || '@' || o.epoch || ' ' || o.chunk::text ORDER BY o.seq), '{}')
      FROM runq.run_output AS o WHERE o.run_id = p_run
$$;
-- A run's run.fenced events as 'operation@epoch', in order.
CREATE FUNCTION pg_temp.fenced(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((e.payload ->> 'operation') || '@' || e.epoch ORDER BY e.event_id), '{}')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.fenced'
$$;
CREATE FUNCTION pg_temp.status(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT g.status FROM runq.get_run(p_run) AS g
$$;
-- The run's watched flag, as stored: NULL, not false, when nobody watches.
CREATE FUNCTION pg_temp.watched(p_run bigint) RETURNS boolean LANGUAGE sql AS $$
    SELECT r.watched FROM runq.runs AS r WHERE r.run_id = p_run
$$;
-- The run's watches, each as 'mine' (this session: its pid and its backend
-- start) or 'pid/start' for any other, sorted.
CREATE FUNCTION pg_temp.watches(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(x.who ORDER BY x.who), '{}')
      FROM (SELECT CASE WHEN w.pid = pg_backend_pid()
                             AND w.backend_start = (SELECT a.backend_start
                                                      FROM pg_stat_get_activity(pg_backend_pid()) AS a)
                        THEN 'mine' ELSE w.pid || '/' || w.backend_start END AS who
              FROM runq.watches AS w WHERE w.run_id = p_run) AS x
$$;
-- A watch of another session, which ended: pid 0 is never a backend's.
CREATE FUNCTION pg_temp.dead_watch(p_run bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO runq.watches (run_id, pid, backend_start) VALUES (p_run, 0, '2001-02-03 04:05:06+00');
    UPDATE runq.runs AS r SET watched = true WHERE r.run_id = p_run;
$$;

-- fixture: no watches of ended sessions and no old finished runs, so that the
-- counts of _forget_watches and purge below are this file's (rolled back with
-- everything else).
SELECT runq._forget_watches() AS pre_forgotten \gset
SELECT runq.purge(interval '1 day', 2147483647, true) AS pre_purged \gset

-- ---------------------------------------------------------------------------
-- emit: chunks numbered per run, no event, the row untouched
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3800) AS a \gset
SELECT updated_at AS a_updated FROM runq.runs WHERE run_id = :a \gset
SELECT is(runq.emit(:a, 1, ARRAY['"a"', '{"t": 1}']::jsonb[]), true, 'emit: the holder appends two chunks');
-- JSON null is a value; only SQL NULL is refused.
SELECT is(runq.emit(:a, 1, ARRAY['null', '[1, 2]']::jsonb[]), true, 'emit: and two more, a JSON null among them');
SELECT is(pg_temp.output(:a), ARRAY['1@1 "a"', '2@1 {"t": 1}', '3@1 null', '4@1 [1, 2]'],
          'the chunks are numbered 1, 2, 3, 4 in order, under epoch 1, continuing across calls');
SELECT is(pg_temp.events(:a), ARRAY['run.created@0', 'run.claimed@1'], 'emit logs no event');
SELECT results_eq(format('SELECT status::text, lease_epoch::bigint, updated_at FROM runq.runs WHERE run_id = %s', :a),
                  format($$VALUES ('running'::text, 1::bigint, %L::timestamptz)$$, :'a_updated'),
                  'emit does not write the run: still running under epoch 1, updated_at as before');
SELECT is((SELECT count(DISTINCT o.created_at)::int FROM runq.run_output AS o WHERE o.run_id = :a AND o.seq <= 2), 1,
          'the chunks of one emit share their created_at');
SELECT ok((SELECT bool_and(o.created_at BETWEEN now() AND clock_timestamp()) FROM runq.run_output AS o WHERE o.run_id = :a),
          'created_at is the time of the emit');

-- Another run numbers its own output from 1.
SELECT pg_temp.running(3801) AS b \gset
SELECT is(runq.emit(:b, 1, ARRAY['"b"']::jsonb[]), true, 'emit: another run''s holder emits');
SELECT is(pg_temp.output(:b), ARRAY['1@1 "b"'], 'another run''s output starts at seq 1');
SELECT is(pg_temp.output(:a), ARRAY['1@1 "a"', '2@1 {"t": 1}', '3@1 null', '4@1 [1, 2]'],
          'and the first run''s output is as it was');

-- ---------------------------------------------------------------------------
-- read_output
-- ---------------------------------------------------------------------------
SELECT results_eq(format('SELECT seq, epoch, chunk FROM runq.read_output(%s)', :a),
                  $$VALUES (1::bigint, 1::bigint, '"a"'::jsonb), (2, 1, '{"t": 1}'), (3, 1, 'null'), (4, 1, '[1, 2]')$$,
                  'read_output with its defaults: every chunk, in seq order');
SELECT results_eq(format('SELECT * FROM runq.read_output(%s, 0)', :a),
                  format('SELECT o.seq, o.epoch, o.chunk, o.created_at FROM runq.run_output AS o WHERE o.run_id = %s ORDER BY o.seq', :a),
                  'read_output: seq, epoch, chunk and created_at as stored');
SELECT results_eq(format('SELECT seq FROM runq.read_output(%s, 1)', :a), 'VALUES (2::bigint), (3), (4)',
                  'after_seq 1: the chunks after it');
SELECT results_eq(format('SELECT seq FROM runq.read_output(%s, 0, 2)', :a), 'VALUES (1::bigint), (2)',
                  'max_chunks 2: the first two');
SELECT results_eq(format('SELECT seq FROM runq.read_output(%s, 2, 1)', :a), 'VALUES (3::bigint)',
                  'after_seq 2, max_chunks 1: the next one only');
SELECT is_empty(format('SELECT * FROM runq.read_output(%s, 4)', :a), 'after the last seq: no rows');
SELECT is_empty(format('SELECT * FROM runq.read_output(%s, 400)', :a), 'after a seq never written: no rows, no error');
SELECT pg_temp.run(3802) AS q \gset
SELECT is_empty(format('SELECT * FROM runq.read_output(%s)', :q), 'a run with no output: no rows, no error');
SELECT results_eq(format('SELECT seq, chunk FROM runq.read_output(%s)', :b), $$VALUES (1::bigint, '"b"'::jsonb)$$,
                  'read_output reads only the run named');

SELECT throws_ok(format('SELECT * FROM runq.read_output(%s, 0, 0)', :a), '22023',
                 'max_chunks must be at least 1, got 0', 'read_output: max_chunks 0 is 22023 naming it');
SELECT throws_ok(format('SELECT * FROM runq.read_output(%s, 0, -1)', :a), '22023',
                 'max_chunks must be at least 1, got -1', 'read_output: a negative max_chunks is 22023 naming it');
SELECT throws_ok(format('SELECT * FROM runq.read_output(%s, 0, NULL)', :a), '22023',
                 'max_chunks must be at least 1, got NULL', 'read_output: max_chunks NULL is 22023 naming it');
SELECT throws_ok(format('SELECT * FROM runq.read_output(%s, NULL)', :a), '22023',
                 'after_seq must be a sequence number (0: from the start), got NULL',
                 'read_output: after_seq NULL is 22023 naming it');
SELECT throws_ok('SELECT * FROM runq.read_output(-3800)', 'RQ003', 'run -3800 not found',
                 'read_output: no such run is RQ003 naming it');
-- A bad argument is reported before the run is looked for.
SELECT throws_ok('SELECT * FROM runq.read_output(-3800, 0, 0)', '22023', 'max_chunks must be at least 1, got 0',
                 'read_output: a bad max_chunks for no such run is still 22023');

-- ---------------------------------------------------------------------------
-- emit's arguments: 22023 before the fence, nothing stored
-- ---------------------------------------------------------------------------
SELECT throws_ok(format('SELECT runq.emit(%s, 1, NULL)', :a), '22023',
                 'chunks must be a non-empty array of jsonb values, none NULL, got NULL', 'emit: chunks NULL is 22023');
SELECT throws_ok(format($$SELECT runq.emit(%s, 1, '{}')$$, :a), '22023',
                 'chunks must be a non-empty array of jsonb values, none NULL, got {}', 'emit: an empty array is 22023');
SELECT throws_ok(format($$SELECT runq.emit(%s, 1, ARRAY['{"a": 1}'::jsonb, NULL])$$, :a), '22023',
                 'chunks must be a non-empty array of jsonb values, none NULL, got {"{\"a\": 1}",NULL}',
                 'emit: an array holding a NULL is 22023, with the array');
SELECT throws_ok(format($$SELECT runq.emit(%s, 1, ARRAY[NULL, '1'::jsonb])$$, :a), '22023',
                 'chunks must be a non-empty array of jsonb values, none NULL, got {NULL,1}',
                 'emit: a NULL first element too');
SELECT throws_ok(format($$SELECT runq.emit(%s, NULL, ARRAY['1'::jsonb])$$, :a), '22023',
                 'epoch must be given, got NULL', 'emit: epoch NULL is 22023 naming it');
SELECT throws_ok($$SELECT runq.emit(NULL, 1, ARRAY['1'::jsonb])$$, '22023',
                 'run_id must be given, got NULL', 'emit: run_id NULL is 22023 naming it');
SELECT throws_ok($$SELECT runq.emit(-3800, 1, ARRAY['1'::jsonb])$$, 'RQ003',
                 'run -3800 not found', 'emit: no such run is RQ003 naming it');
SELECT is(pg_temp.output(:a), ARRAY['1@1 "a"', '2@1 {"t": 1}', '3@1 null', '4@1 [1, 2]'],
          'the refused emits stored nothing: no chunk of a partly good array either');
SELECT is(pg_temp.events(:a), ARRAY['run.created@0', 'run.claimed@1'], 'and logged nothing');

-- ---------------------------------------------------------------------------
-- Claimed again: earlier output stays, numbering goes on; the old epoch fenced
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3803) AS c \gset
SELECT is(runq.emit(:c, 1, ARRAY['"one"', '"two"']::jsonb[]), true, 'epoch 1 emits two chunks');
SELECT is(runq.release(:c, 1), true, 'epoch 1 gives the run back');
SELECT is((SELECT epoch FROM runq.claim(ARRAY[3803], 'w-wo-2', interval '1 hour')), 2::bigint,
          'the run is claimed again, under epoch 2');
SELECT is(pg_temp.output(:c), ARRAY['1@1 "one"', '2@1 "two"'], 'the output of epoch 1 stays after the requeue');
SELECT is(runq.emit(:c, 2, ARRAY['"three"']::jsonb[]), true, 'epoch 2 emits');
SELECT is(pg_temp.output(:c), ARRAY['1@1 "one"', '2@1 "two"', '3@2 "three"'],
          'epoch 2''s chunk is seq 3, under epoch 2');
SELECT results_eq(format('SELECT seq, epoch FROM runq.read_output(%s, 1)', :c), 'VALUES (2::bigint, 1::bigint), (3, 2)',
                  'read_output gives each chunk''s epoch');

SELECT is(runq.emit(:c, 1, ARRAY['"stale"']::jsonb[]), false, 'a stale epoch''s emit returns false');
SELECT is(runq.emit(:c, 1, ARRAY['"stale again"']::jsonb[]), false, 'and again false');
SELECT is(pg_temp.output(:c), ARRAY['1@1 "one"', '2@1 "two"', '3@2 "three"'], 'the stale emits stored nothing');
SELECT is(pg_temp.fenced(:c), ARRAY['emit@1'], 'exactly one run.fenced for epoch 1 after two stale emits, operation emit');
SELECT is((SELECT e.payload FROM runq.run_events(:c) AS e WHERE e.type = 'run.fenced'),
          '{"operation": "emit", "current_epoch": 2, "status": "running"}'::jsonb,
          'the run.fenced payload: operation emit, the current epoch and status');
SELECT throws_ok(format('SELECT runq.emit(%s, 1, NULL)', :c), '22023',
                 'chunks must be a non-empty array of jsonb values, none NULL, got NULL',
                 'a stale worker''s bad chunks are 22023 all the same: arguments first');
SELECT results_eq(format('SELECT status::text, lease_epoch::bigint FROM runq.runs WHERE run_id = %s', :c),
                  $$VALUES ('running'::text, 2::bigint)$$, 'the run goes on under epoch 2');
SELECT is(runq.emit(:c, 2, ARRAY['"four"']::jsonb[]), true, 'and epoch 2 still emits');
SELECT is(pg_temp.output(:c), ARRAY['1@1 "one"', '2@1 "two"', '3@2 "three"', '4@2 "four"'],
          'seq 4: no gap left by the refused emits');

-- ---------------------------------------------------------------------------
-- Epochs the run never had: false, nothing stored, nothing logged
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3804) AS n \gset
SELECT is(runq.emit(:n, 5, ARRAY['"forged"']::jsonb[]), false, 'epoch 5 on a run at epoch 1: false');
SELECT is(runq.emit(:n, -1, ARRAY['"forged"']::jsonb[]), false, 'a negative epoch: false');
SELECT is(runq.emit(:n, 9223372036854775807, ARRAY['"forged"']::jsonb[]), false, 'the largest bigint: false');
SELECT is(pg_temp.output(:n), '{}'::text[], 'epochs the run never had stored nothing');
SELECT is(pg_temp.events(:n), ARRAY['run.created@0', 'run.claimed@1'], 'and logged nothing, not even run.fenced');
-- Epoch 0 is the epoch of the queued run, which the run had and lost: as for
-- every worker call (18_epochs.sql), it is an ordinary stale epoch.
SELECT is(runq.emit(:n, 0, ARRAY['"forged"']::jsonb[]), false, 'epoch 0 on a run at epoch 1: false');
SELECT is(pg_temp.output(:n), '{}'::text[], 'epoch 0 stored nothing');
SELECT is(pg_temp.fenced(:n), ARRAY['emit@0'], 'epoch 0 is stale, as for checkpoint and begin_tool: one run.fenced@0');
SELECT is(runq.emit(:n, 1, ARRAY['"real"']::jsonb[]), true, 'the live epoch still emits');
SELECT is(pg_temp.output(:n), ARRAY['1@1 "real"'], 'its chunk is seq 1');

-- ---------------------------------------------------------------------------
-- Stops: a cancel flag, a deadline passed
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3805) AS k \gset
SELECT is(runq.emit(:k, 1, ARRAY['"before"']::jsonb[]), true, 'cancel: the run emits before the cancel');
SELECT is(runq.cancel(:k, 'enough'), 'cancel_requested', 'cancel: requested of the running run');
SELECT is(runq.emit(:k, 1, ARRAY['"after"']::jsonb[]), false, 'cancel: the holder''s next emit returns false');
SELECT is(pg_temp.status(:k), 'cancelled', 'cancel: and the run is cancelled');
SELECT is(pg_temp.events(:k), ARRAY['run.created@0', 'run.claimed@1', 'run.cancel_requested@1', 'run.cancelled@1'],
          'cancel: run.cancel_requested then run.cancelled, under epoch 1, no run.fenced');
SELECT is((SELECT e.payload ->> 'observed_by' FROM runq.run_events(:k) AS e WHERE e.type = 'run.cancelled'), 'emit',
          'cancel: observed by emit');
SELECT is(pg_temp.output(:k), ARRAY['1@1 "before"'], 'cancel: the refused chunk is not stored, the earlier one stays');

SELECT pg_temp.running(3806, interval '1 hour') AS d \gset
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = :d;
SELECT is(runq.emit(:d, 1, ARRAY['"late"']::jsonb[]), false, 'deadline: an emit past it returns false');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :d),
                  $$VALUES ('failed'::text, 'deadline_exceeded'::text)$$,
                  'deadline: the run failed with deadline_exceeded');
SELECT ok(pg_temp.failure_complete(:d), 'deadline: with a complete failure record');
SELECT is(pg_temp.events(:d), ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1'], 'deadline: run.failed, no run.fenced');
SELECT is(pg_temp.output(:d), '{}'::text[], 'deadline: nothing stored');

-- ---------------------------------------------------------------------------
-- After the end
-- ---------------------------------------------------------------------------
SELECT is(runq.complete(:a, 1, '{"done": true}'), true, 'the first run completes');
SELECT is(runq.emit(:a, 1, ARRAY['"late"']::jsonb[]), false, 'an emit after complete returns false');
SELECT is(runq.emit(:a, 1, ARRAY['"later"']::jsonb[]), false, 'and again false');
SELECT is(pg_temp.fenced(:a), ARRAY['emit@1'], 'exactly one run.fenced for the finished run''s epoch');
SELECT is((SELECT e.payload ->> 'status' FROM runq.run_events(:a) AS e WHERE e.type = 'run.fenced'), 'succeeded',
          'the run.fenced says the run succeeded');
SELECT is(pg_temp.status(:a), 'succeeded', 'the run is still succeeded');
SELECT results_eq(format('SELECT seq, chunk FROM runq.read_output(%s)', :a),
                  $$VALUES (1::bigint, '"a"'::jsonb), (2, '{"t": 1}'), (3, 'null'), (4, '[1, 2]')$$,
                  'a finished run''s output is still read, without the refused chunks');

-- ---------------------------------------------------------------------------
-- watch and unwatch
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3810) AS w \gset
SELECT is(pg_temp.watched(:w), NULL, 'a run nobody watched: watched is NULL');
SELECT results_eq(format('SELECT * FROM runq.watch(%s)', :w), format('SELECT * FROM runq.get_run(%s)', :w),
                  'watch answers the run as get_run does');
SELECT is(pg_temp.watched(:w), true, 'watch sets watched');
SELECT is(pg_temp.watches(:w), ARRAY['mine'], 'and records one watch: this session''s pid and backend start');
SELECT is((SELECT w2.pid::bigint FROM runq.watches AS w2 WHERE w2.run_id = :w), pg_backend_pid()::bigint, 'the watch names this backend''s pid');
SELECT is((SELECT status FROM runq.watch(:w)), 'running', 'a second watch answers the run again');
SELECT is(pg_temp.watches(:w), ARRAY['mine'], 'and adds no second row');
SELECT is(pg_temp.watches(:a), '{}'::text[], 'another run has no watch');

-- A run already ended is in the answer.
SELECT results_eq(format('SELECT status, result FROM runq.watch(%s)', :a),
                  $$VALUES ('succeeded'::text, '{"done": true}'::jsonb)$$,
                  'watch of a finished run answers it finished, with its result');
SELECT is(pg_temp.watched(:a), true, 'a finished run may be watched too');

SELECT throws_ok('SELECT * FROM runq.watch(-3800)', 'RQ003', 'run -3800 not found', 'watch: no such run is RQ003');
SELECT throws_ok('SELECT * FROM runq.watch(NULL)', '22023', 'run_id must be given, got NULL',
                 'watch: a NULL run_id is a bad argument (22023), as in every lookup');

-- unwatch: ends this session's watch only; the flag stays while another
-- session's watch is left.
SELECT pg_temp.dead_watch(:w);
SELECT is(pg_temp.watches(:w), ARRAY['0/' || '2001-02-03 04:05:06+00'::timestamptz, 'mine'],
          'fixture: another session watches the run too');
SELECT is(runq.unwatch(:w), true, 'unwatch: true, this session watched it');
SELECT is(pg_temp.watches(:w), ARRAY['0/' || '2001-02-03 04:05:06+00'::timestamptz],
          'unwatch deletes this session''s watch only');
SELECT is(pg_temp.watched(:w), true, 'the flag stays: another watch is left');
SELECT is(runq.unwatch(:w), false, 'unwatch again: false, this session has no watch left');
SELECT is(pg_temp.watched(:w), true, 'and the flag is still set');

SELECT is(runq.unwatch(:a), true, 'unwatch of the only watch: true');
SELECT is(pg_temp.watched(:a), NULL, 'the last watch gone, watched is NULL again');
SELECT is(pg_temp.watches(:a), '{}'::text[], 'and no watch is left');
SELECT is(runq.unwatch(:b), false, 'unwatch of a run never watched: false');
SELECT is(pg_temp.watched(:b), NULL, 'and its flag stays NULL');
SELECT throws_ok('SELECT runq.unwatch(-3800)', 'RQ003', 'run -3800 not found', 'unwatch: no such run is RQ003');
SELECT throws_ok('SELECT runq.unwatch(NULL)', '22023', 'run_id must be given, got NULL',
                 'unwatch: a NULL run_id is a bad argument (22023), as in every lookup');

-- ---------------------------------------------------------------------------
-- _forget_watches: the watches of sessions that ended
-- ---------------------------------------------------------------------------
-- :w is watched by an ended session only. :f is watched by this session, by
-- an ended one and by this pid under another start time (an earlier session
-- that had the same pid). :g is watched by this session alone.
SELECT pg_temp.running(3811) AS f \gset
SELECT pg_temp.running(3812) AS g \gset
SELECT status AS f_status FROM runq.watch(:f) \gset
SELECT status AS g_status FROM runq.watch(:g) \gset
SELECT pg_temp.dead_watch(:f);
INSERT INTO runq.watches (run_id, pid, backend_start) VALUES (:f, pg_backend_pid(), '2001-02-03 04:05:06+00');
SELECT is(cardinality(pg_temp.watches(:f)), 3, 'fixture: three watches of one run, one of them this session''s');

SELECT is(runq._forget_watches()::bigint, 2::bigint, '_forget_watches: two runs lost a watch');
SELECT is(pg_temp.watches(:w), '{}'::text[], 'the ended session''s watch is gone');
SELECT is(pg_temp.watched(:w), NULL, 'and the run it was the last watch of is no longer watched');
SELECT is(pg_temp.watches(:f), ARRAY['mine'],
          'a run''s watches of an ended session and of a reused pid are gone, this session''s stays');
SELECT is(pg_temp.watched(:f), true, 'that run is still watched');
SELECT is(pg_temp.watches(:g), ARRAY['mine'], 'this session''s watch of another run stays');
SELECT is(pg_temp.watched(:g), true, 'and that run is still watched');
SELECT is(runq._forget_watches()::bigint, 0::bigint, '_forget_watches again: nothing to forget');

-- The sweep forgets them too.
SELECT pg_temp.dead_watch(:b);
SELECT is(pg_temp.swept(), '{}'::text[], 'sweep: no run of this file to decide');
SELECT is(pg_temp.watches(:b), '{}'::text[], 'sweep: the ended session''s watch is gone');
SELECT is(pg_temp.watched(:b), NULL, 'sweep: and the run is no longer watched');
SELECT is(pg_temp.watches(:f), ARRAY['mine'], 'sweep: this session''s watch stays');

-- ---------------------------------------------------------------------------
-- A watched run's transitions apply and log as any run's do
-- ---------------------------------------------------------------------------
-- Each takes the path that notifies (the notification itself is sent at
-- commit, and is tested in pytest); it must not change the answer.
SELECT is(runq.emit(:f, 1, ARRAY['"seen"']::jsonb[]), true, 'watched: emit returns true');
SELECT is(pg_temp.output(:f), ARRAY['1@1 "seen"'], 'watched: and stores its chunk');
SELECT is(runq.complete(:f, 1, '{"ok": 1}'), true, 'watched: complete returns true');
SELECT results_eq(format('SELECT status, result FROM runq.get_run(%s)', :f),
                  $$VALUES ('succeeded'::text, '{"ok": 1}'::jsonb)$$, 'watched: the run succeeded with its result');
SELECT is(pg_temp.events(:f), ARRAY['run.created@0', 'run.claimed@1', 'run.succeeded@1'],
          'watched: one run.succeeded, no run.fenced');

SELECT is(runq.fail(:g, 1, '{"code": "tool_error"}'), true, 'watched: fail returns true');
SELECT is(pg_temp.events(:g), ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1'], 'watched: the run failed');

SELECT pg_temp.running(3813) AS u \gset
SELECT status AS u_status FROM runq.watch(:u) \gset
SELECT is(runq.ask_user(:u, 1, '{"q": "go?"}'), true, 'watched: ask_user returns true');
SELECT is(pg_temp.events(:u), ARRAY['run.created@0', 'run.claimed@1', 'run.waiting_for_user@1'],
          'watched: the run waits for its user');

SELECT pg_temp.run(3814) AS cq \gset
SELECT status AS cq_status FROM runq.watch(:cq) \gset
SELECT is(runq.cancel(:cq), 'cancelled', 'watched: cancel of a queued run returns cancelled');
SELECT is(pg_temp.events(:cq), ARRAY['run.created@0', 'run.cancelled@0'], 'watched: the queued run is cancelled');

SELECT pg_temp.running(3815) AS m1 \gset
SELECT pg_temp.running(3815) AS m2 \gset
SELECT status AS m1_status FROM runq.watch(:m1) \gset
SELECT results_eq(format('SELECT run_id, completed FROM runq.complete_many(ARRAY[%s, %s]::bigint[], ARRAY[1, 1]::bigint[])', :m1, :m2),
                  format('VALUES (%s::bigint, true), (%s, true)', :m1, :m2),
                  'watched: complete_many completes the watched run and the other');
SELECT is(pg_temp.events(:m1), ARRAY['run.created@0', 'run.claimed@1', 'run.succeeded@1'],
          'watched: complete_many logged the watched run''s run.succeeded');

SELECT pg_temp.running(3816) AS cc \gset
SELECT status AS cc_status FROM runq.watch(:cc) \gset
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[3817])', :cc),
                  $$VALUES (true, NULL::bigint)$$, 'watched: complete_and_claim completes the run');
SELECT is(pg_temp.events(:cc), ARRAY['run.created@0', 'run.claimed@1', 'run.succeeded@1'],
          'watched: complete_and_claim logged its run.succeeded');

-- The sweep: an expired lease ends a watched run (policy fail: orphaned), and
-- a queued watched run past its deadline fails.
SELECT pg_temp.running(3818, p_policy => 'fail') AS x \gset
SELECT status AS x_status FROM runq.watch(:x) \gset
UPDATE runq.runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = :x;
SELECT pg_temp.run(3819, interval '1 hour') AS y \gset
SELECT status AS y_status FROM runq.watch(:y) \gset
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = :y;
SELECT is(pg_temp.swept(), ARRAY[:x || ':orphaned', :y || ':deadline_exceeded'],
          'watched: the sweep decides both watched runs');
SELECT results_eq(format($$SELECT run_id, status, failure ->> 'code' FROM runq.get_run(%s)
                           UNION ALL SELECT run_id, status, failure ->> 'code' FROM runq.get_run(%s)$$, :x, :y),
                  format($$VALUES (%s::bigint, 'failed'::text, 'orphaned'::text), (%s, 'failed', 'deadline_exceeded')$$, :x, :y),
                  'watched: one failed orphaned, the other deadline_exceeded');
SELECT is(pg_temp.events(:x), ARRAY['run.created@0', 'run.claimed@1', 'run.failed@1'], 'watched: the sweep logged run.failed');

-- A cancel flag met by the holder's call (runq._refuse).
SELECT pg_temp.running(3820) AS z \gset
SELECT status AS z_status FROM runq.watch(:z) \gset
SELECT is(runq.cancel(:z), 'cancel_requested', 'watched: cancel of a running run is requested');
SELECT is(runq.emit(:z, 1, ARRAY['"no"']::jsonb[]), false, 'watched: the holder''s emit returns false');
SELECT is(pg_temp.status(:z), 'cancelled', 'watched: and the run is cancelled');

SELECT ok(runq._notify_watchers(ARRAY[:f, :b, -3800]) AND runq._notify_watchers('{}'),
          '_notify_watchers answers true for watched, unwatched, missing and no runs');
SELECT is(pg_temp.watches(:f), ARRAY['mine'], 'a run that ended keeps its watches until unwatch or the session ends');

-- ---------------------------------------------------------------------------
-- Purge takes a run's output and watches with it
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(3830) AS p \gset
SELECT is(runq.emit(:p, 1, ARRAY['"x"', '"y"']::jsonb[]) AND runq.complete(:p, 1), true,
          'purge: a run emits and succeeds');
SELECT status AS p_status FROM runq.watch(:p) \gset
SELECT pg_temp.dead_watch(:p);
UPDATE runq.runs SET finished_at = now() - interval '2 days' WHERE run_id = :p;
SELECT is(runq.purge(interval '1 day'), 1::bigint, 'purge: the old run is purged');
SELECT is((SELECT count(*)::int FROM runq.run_output WHERE run_id = :p), 0, 'purge: its output is gone');
SELECT is((SELECT count(*)::int FROM runq.watches WHERE run_id = :p), 0, 'purge: its watches are gone');
SELECT throws_ok(format('SELECT * FROM runq.read_output(%s)', :p), 'RQ003', format('run %s not found', :p),
                 'purge: read_output of the purged run is RQ003');
SELECT is(pg_temp.output(:a), ARRAY['1@1 "a"', '2@1 {"t": 1}', '3@1 null', '4@1 [1, 2]'],
          'purge: a recent finished run''s output is kept');
SELECT is(pg_temp.output(:c), ARRAY['1@1 "one"', '2@1 "two"', '3@2 "three"', '4@2 "four"'],
          'purge: a running run''s output is kept');
SELECT is(pg_temp.watches(:f), ARRAY['mine'], 'purge: a recent finished run''s watch is kept');

-- ---------------------------------------------------------------------------
-- Grants
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE grants (fn name, argtypes name[], roles text[]) ON COMMIT DROP;
INSERT INTO grants VALUES
    ('watch',       ARRAY['bigint'],                      ARRAY['runq_admin', 'runq_client']),
    ('unwatch',     ARRAY['bigint'],                      ARRAY['runq_admin', 'runq_client']),
    ('emit',        ARRAY['bigint', 'bigint', 'jsonb[]'], ARRAY['runq_admin', 'runq_worker']),
    ('read_output', ARRAY['bigint', 'bigint', 'integer'],
                    ARRAY['runq_admin', 'runq_client', 'runq_observer', 'runq_worker']),
    ('_notify_watchers', ARRAY['bigint[]'],               ARRAY[]::text[]),
    ('_forget_watches',  ARRAY[]::name[],                 ARRAY[]::text[]);
-- 6 x 5 = 30 tests.
SELECT function_privs_are('runq', g.fn, g.argtypes, r.role,
                          CASE WHEN r.role = ANY (g.roles) THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END,
                          format('%s %s execute runq.%s', r.role,
                                 CASE WHEN r.role = ANY (g.roles) THEN 'can' ELSE 'cannot' END, g.fn))
  FROM grants AS g,
       unnest(ARRAY['public', 'runq_client', 'runq_worker', 'runq_admin', 'runq_observer']) WITH ORDINALITY AS r (role, n)
 ORDER BY g.fn, r.n;

-- And from outside, under SET ROLE.
SELECT pg_temp.running(3840) AS h \gset
SET ROLE runq_observer;
SELECT results_eq(format('SELECT seq FROM runq.read_output(%s)', :c), 'VALUES (1::bigint), (2), (3), (4)',
                  'runq_observer reads output');
SELECT throws_ok(format($$SELECT runq.emit(%s, 1, ARRAY['"o"'::jsonb])$$, :h), '42501', NULL,
                 'runq_observer may not emit (42501)');
SELECT throws_ok(format('SELECT * FROM runq.watch(%s)', :h), '42501', NULL, 'runq_observer may not watch (42501)');
RESET ROLE;
SET ROLE runq_worker;
SELECT is(runq.emit(:h, 1, ARRAY['"w"']::jsonb[]), true, 'runq_worker emits');
SELECT throws_ok(format('SELECT * FROM runq.watch(%s)', :h), '42501', NULL, 'runq_worker may not watch (42501)');
RESET ROLE;
SET ROLE runq_client;
SELECT is((SELECT status FROM runq.watch(:h)), 'running', 'runq_client watches');
SELECT is(runq.unwatch(:h), true, 'runq_client unwatches its watch');
SELECT results_eq(format('SELECT seq, chunk FROM runq.read_output(%s)', :h), $$VALUES (1::bigint, '"w"'::jsonb)$$,
                  'runq_client reads output');
SELECT throws_ok(format($$SELECT runq.emit(%s, 1, ARRAY['"c"'::jsonb])$$, :h), '42501', NULL,
                 'runq_client may not emit (42501)');
RESET ROLE;
SELECT is(pg_temp.output(:h), ARRAY['1@1 "w"'], 'only the worker''s chunk was stored');

SELECT * FROM finish();
ROLLBACK;
