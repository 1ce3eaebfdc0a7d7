-- Batched worker calls: runq.heartbeat_many and runq.complete_many answer
-- each element exactly as runq.heartbeat and runq.complete would, in one
-- statement: the live elements extend their lease or succeed (with their
-- result, NULL when results or its element is NULL, and one run.succeeded);
-- a stale epoch or a run not running is false with one run.fenced per run
-- and epoch, however many calls; an epoch the run never had is false with no
-- event; a cancel flag makes the holder's heartbeat element false and cancels the run
-- (its started tool calls resolved), while complete still applies. One row
-- per element in input order, none for empty arrays, and the same runs,
-- answers and events as the single calls one by one. The batch rules raise
-- 22023 naming the argument, an unknown run RQ003 naming it, and a rejected
-- batch changes nothing, not even its good elements. Grants are in
-- 17_privileges.sql. Classes 2300..2399.
BEGIN;
SELECT plan(92);

-- A run of its own class, claimed under epoch 1 with a lease of an hour.
CREATE FUNCTION pg_temp.running(p_class int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
BEGIN
    SELECT s.run_id INTO v_run FROM runq.submit(tenant_id => 'batch', kind => 'k', priority => p_class) AS s;
    PERFORM FROM runq.claim(ARRAY[p_class], lease => interval '1 hour') AS c WHERE c.run_id = v_run AND c.epoch = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;

-- Released by epoch 1 and claimed again: running under epoch 2.
CREATE FUNCTION pg_temp.taken_over(p_class int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint := pg_temp.running(p_class);
BEGIN
    PERFORM runq.release(v_run, 1);
    PERFORM FROM runq.claim(ARRAY[p_class], lease => interval '1 hour') AS c WHERE c.run_id = v_run AND c.epoch = 2;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % was not claimed again under epoch 2', v_run;
    END IF;
    RETURN v_run;
END
$$;

-- One batch of every kind of element, on classes p_base .. p_base + 8: pos
-- is the element's place in the batch, ep the epoch it is called with. The
-- runs are made from the last element to the first, so that their run_ids
-- fall as pos rises: rows in run_id order are not rows in input order.
CREATE FUNCTION pg_temp.scenario(p_base int) RETURNS TABLE(pos int, label text, rid bigint, ep bigint)
    LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
BEGIN
    v := pg_temp.taken_over(p_base + 8);
    PERFORM runq.cancel(v, 'stop');
    pos := 9; label := 'stale_cancel'; rid := v; ep := 1; RETURN NEXT;

    pos := 8; label := 'live2'; rid := pg_temp.running(p_base + 7); ep := 1; RETURN NEXT;

    v := pg_temp.running(p_base + 6);
    PERFORM runq.begin_tool(v, 1, 'lookup', 'search', 'read_only');
    PERFORM runq.begin_tool(v, 1, 'charge', 'card', 'non_idempotent');
    PERFORM runq.cancel(v, 'stop');
    pos := 7; label := 'cancel'; rid := v; ep := 1; RETURN NEXT;

    v := (SELECT s.run_id FROM runq.submit(tenant_id => 'batch', kind => 'k', priority => p_base + 5) AS s);
    pos := 6; label := 'queued'; rid := v; ep := 0; RETURN NEXT;

    v := pg_temp.running(p_base + 4);
    PERFORM runq.complete(v, 1, '{"first": true}');
    pos := 5; label := 'succeeded'; rid := v; ep := 1; RETURN NEXT;

    pos := 4; label := 'negative'; rid := pg_temp.running(p_base + 3); ep := -1; RETURN NEXT;
    pos := 3; label := 'above'; rid := pg_temp.running(p_base + 2); ep := 2; RETURN NEXT;
    pos := 2; label := 'stale'; rid := pg_temp.taken_over(p_base + 1); ep := 1; RETURN NEXT;
    pos := 1; label := 'live'; rid := pg_temp.running(p_base); ep := 1; RETURN NEXT;
END
$$;

-- The run row as it is stored.
CREATE FUNCTION pg_temp.row_of(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT row_to_json(r)::text FROM runq.runs AS r WHERE r.run_id = p_run
$$;
-- The events of a run after event p_mark, as 'type@epoch'.
CREATE FUNCTION pg_temp.since(p_run bigint, p_mark bigint) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(e.type || '@' || e.epoch, ' ' ORDER BY e.event_id), '')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.event_id > p_mark
$$;
-- The run.fenced epochs of a run, in order.
CREATE FUNCTION pg_temp.fenced(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(e.epoch::text, ',' ORDER BY e.event_id), '')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.fenced'
$$;
-- What calls made after event p_mark and time p_t0 did to a run, in terms
-- that do not depend on its run_id, class or clock: so two runs set up alike
-- and called alike have the same trace.
CREATE FUNCTION pg_temp.trace(p_run bigint, p_mark bigint, p_t0 timestamptz) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' | ',
        (SELECT format('%s epoch %s attempts %s cancel %s result %s leased %s finished %s beaten %s',
                       r.status, r.lease_epoch, r.attempts, r.cancel_requested, coalesce(r.result::text, 'NULL'),
                       r.lease_expires_at IS NOT NULL, r.finished_at IS NOT NULL,
                       coalesce(r.heartbeat_at > p_t0 AND r.lease_expires_at = r.heartbeat_at + r.lease, false))
           FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT string_agg(format('%s@%s %s', e.type, e.epoch, e.payload), ', ' ORDER BY e.event_id)
           FROM runq.run_events AS e WHERE e.run_id = p_run AND e.event_id > p_mark),
        (SELECT string_agg(format('%s:%s@%s', t.call_id, t.status, t.epoch), ', ' ORDER BY t.call_id)
           FROM runq.tool_calls AS t WHERE t.run_id = p_run))
$$;

-- ---------------------------------------------------------------------------
-- heartbeat_many: a batch of every kind of element, called twice, against
-- the same scenario through runq.heartbeat one by one
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE hb ON COMMIT DROP AS SELECT * FROM pg_temp.scenario(2300);
CREATE TEMP TABLE hb_one ON COMMIT DROP AS SELECT * FROM pg_temp.scenario(2310);
CREATE TEMP TABLE hb_before ON COMMIT DROP AS SELECT rid, pg_temp.row_of(rid) AS r FROM hb;

SELECT max(event_id) AS hb_mark FROM runq.run_events \gset
SELECT clock_timestamp() AS hb_t0 \gset
CREATE TEMP TABLE hb_out ON COMMIT DROP AS
SELECT o.run_id, o.alive, o.n
  FROM runq.heartbeat_many(ARRAY(SELECT rid FROM hb ORDER BY pos), ARRAY(SELECT ep FROM hb ORDER BY pos))
       WITH ORDINALITY AS o(run_id, alive, n);

SELECT is((SELECT string_agg(hb.label || ':' || o.alive, ' ' ORDER BY o.n)
             FROM hb_out AS o JOIN hb ON hb.pos = o.n AND hb.rid = o.run_id),
          'live:true stale:false above:false negative:false succeeded:false queued:false cancel:false live2:true stale_cancel:false',
          'heartbeat_many: one row per element, in input order, alive as heartbeat answers it');
SELECT is((SELECT count(*)::int FROM hb_out), 9, 'heartbeat_many: and no other row');
SELECT is(ARRAY(SELECT hb.label FROM hb JOIN runq.runs AS r ON r.run_id = hb.rid
                 WHERE r.heartbeat_at > :'hb_t0' AND r.lease_expires_at = r.heartbeat_at + r.lease
                 ORDER BY hb.pos),
          ARRAY['live', 'live2'],
          'heartbeat_many: each live element''s lease is extended by its length from now, heartbeat_at set; no other''s');
SELECT is(ARRAY(SELECT hb.label FROM hb JOIN hb_before AS b USING (rid)
                 WHERE pg_temp.row_of(hb.rid) IS DISTINCT FROM b.r ORDER BY hb.pos),
          ARRAY['live', 'cancel', 'live2'],
          'heartbeat_many: the stale (cancel-requested or not), never-had, succeeded and queued elements leave their run as it was');
SELECT is(ARRAY(SELECT hb.label || ': ' || pg_temp.since(hb.rid, :hb_mark) FROM hb ORDER BY hb.pos),
          ARRAY['live: ', 'stale: run.fenced@1', 'above: ', 'negative: ', 'succeeded: run.fenced@1',
                'queued: run.fenced@0', 'cancel: run.cancelled@1 run.tool_uncertain@1', 'live2: ',
                'stale_cancel: run.fenced@1'],
          'heartbeat_many: run.fenced for a stale epoch and for runs not running, none for epochs never had, run.cancelled for the cancel flag');
SELECT is((SELECT e.payload::jsonb FROM runq.run_events AS e JOIN hb ON hb.rid = e.run_id
            WHERE hb.label = 'stale' AND e.type = 'run.fenced'),
          '{"operation": "heartbeat", "current_epoch": 2, "status": "running"}'::jsonb,
          'heartbeat_many: the stale element''s run.fenced is heartbeat''s');
SELECT is((SELECT e.payload::jsonb FROM runq.run_events AS e JOIN hb ON hb.rid = e.run_id
            WHERE hb.label = 'cancel' AND e.type = 'run.cancelled'),
          '{"reason": "cancel_requested", "observed_by": "heartbeat"}'::jsonb,
          'heartbeat_many: the cancelled run''s run.cancelled was observed by heartbeat');
SELECT is((SELECT format('%s %s %s', r.status, r.lease_expires_at IS NULL, r.finished_at IS NOT NULL)
             FROM runq.runs AS r JOIN hb ON hb.rid = r.run_id WHERE hb.label = 'cancel'),
          'cancelled t t', 'heartbeat_many: the cancel-requested run is cancelled in that statement');
SELECT is((SELECT string_agg(t.call_id || ':' || t.status, ' ' ORDER BY t.call_id)
             FROM runq.tool_calls AS t JOIN hb ON hb.rid = t.run_id WHERE hb.label = 'cancel'),
          'charge:uncertain lookup:retryable',
          'heartbeat_many: the cancelled run''s started tool calls are resolved, as heartbeat resolves them');

CREATE TEMP TABLE hb_out2 ON COMMIT DROP AS
SELECT o.run_id, o.alive, o.n
  FROM runq.heartbeat_many(ARRAY(SELECT rid FROM hb ORDER BY pos), ARRAY(SELECT ep FROM hb ORDER BY pos))
       WITH ORDINALITY AS o(run_id, alive, n);
SELECT is((SELECT string_agg(hb.label || ':' || o.alive, ' ' ORDER BY o.n)
             FROM hb_out2 AS o JOIN hb ON hb.pos = o.n AND hb.rid = o.run_id),
          'live:true stale:false above:false negative:false succeeded:false queued:false cancel:false live2:true stale_cancel:false',
          'heartbeat_many again: the same answers (the cancelled run is now not running)');
SELECT is(ARRAY(SELECT hb.label || ': ' || pg_temp.fenced(hb.rid) FROM hb ORDER BY hb.pos),
          ARRAY['live: ', 'stale: 1', 'above: ', 'negative: ', 'succeeded: 1', 'queued: 0', 'cancel: 1', 'live2: ',
                'stale_cancel: 1'],
          'heartbeat_many twice: exactly one run.fenced per run and stale epoch, none for an epoch never had');

SELECT max(event_id) AS hb_one_mark FROM runq.run_events \gset
SELECT clock_timestamp() AS hb_one_t0 \gset
CREATE TEMP TABLE hb_one_out ON COMMIT DROP AS SELECT pos, runq.heartbeat(rid, ep) AS alive FROM hb_one;
CREATE TEMP TABLE hb_one_out2 ON COMMIT DROP AS SELECT pos, runq.heartbeat(rid, ep) AS alive FROM hb_one;
SELECT is(ARRAY(SELECT o.alive FROM hb_out AS o ORDER BY o.n) || ARRAY(SELECT o.alive FROM hb_out2 AS o ORDER BY o.n),
          ARRAY(SELECT o.alive FROM hb_one_out AS o ORDER BY o.pos) || ARRAY(SELECT o.alive FROM hb_one_out2 AS o ORDER BY o.pos),
          'heartbeat_many answers as heartbeat does, element by element, both times');
SELECT is(ARRAY(SELECT pg_temp.trace(hb.rid, :hb_mark, :'hb_t0') FROM hb ORDER BY hb.pos),
          ARRAY(SELECT pg_temp.trace(o.rid, :hb_one_mark, :'hb_one_t0') FROM hb_one AS o ORDER BY o.pos),
          'heartbeat_many leaves the runs, events (type, epoch, payload) and tool calls that heartbeat one by one leaves');

-- ---------------------------------------------------------------------------
-- complete_many: the same, with a result per element (live2's NULL)
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE cm ON COMMIT DROP AS
SELECT s.*, CASE WHEN s.pos <> 8 THEN jsonb_build_object('by', s.pos) END AS res FROM pg_temp.scenario(2320) AS s;
CREATE TEMP TABLE cm_one ON COMMIT DROP AS
SELECT s.*, CASE WHEN s.pos <> 8 THEN jsonb_build_object('by', s.pos) END AS res FROM pg_temp.scenario(2330) AS s;
CREATE TEMP TABLE cm_before ON COMMIT DROP AS SELECT rid, pg_temp.row_of(rid) AS r FROM cm;

SELECT max(event_id) AS cm_mark FROM runq.run_events \gset
SELECT clock_timestamp() AS cm_t0 \gset
CREATE TEMP TABLE cm_out ON COMMIT DROP AS
SELECT o.run_id, o.completed, o.n
  FROM runq.complete_many(ARRAY(SELECT rid FROM cm ORDER BY pos), ARRAY(SELECT ep FROM cm ORDER BY pos),
                          ARRAY(SELECT res FROM cm ORDER BY pos))
       WITH ORDINALITY AS o(run_id, completed, n);

SELECT is((SELECT string_agg(cm.label || ':' || o.completed, ' ' ORDER BY o.n)
             FROM cm_out AS o JOIN cm ON cm.pos = o.n AND cm.rid = o.run_id),
          'live:true stale:false above:false negative:false succeeded:false queued:false cancel:true live2:true stale_cancel:false',
          'complete_many: one row per element, in input order, completed as complete answers it (a cancel flag does not stop it)');
SELECT is((SELECT count(*)::int FROM cm_out), 9, 'complete_many: and no other row');
SELECT is(ARRAY(SELECT format('%s: %s %s', cm.label, r.status, coalesce(r.result::text, 'NULL'))
                  FROM cm JOIN runq.runs AS r ON r.run_id = cm.rid ORDER BY cm.pos),
          ARRAY['live: succeeded {"by": 1}', 'stale: running NULL', 'above: running NULL', 'negative: running NULL',
                'succeeded: succeeded {"first": true}', 'queued: queued NULL', 'cancel: succeeded {"by": 7}',
                'live2: succeeded NULL', 'stale_cancel: running NULL'],
          'complete_many: each completed run succeeded with its own result (NULL for a NULL element); the others keep theirs');
SELECT is(ARRAY(SELECT cm.label FROM cm JOIN runq.runs AS r ON r.run_id = cm.rid
                 WHERE r.finished_at > :'cm_t0' AND r.lease_expires_at IS NULL ORDER BY cm.pos),
          ARRAY['live', 'cancel', 'live2'], 'complete_many: each completed run''s lease ended and it finished now');
SELECT is(ARRAY(SELECT cm.label FROM cm JOIN cm_before AS b USING (rid)
                 WHERE pg_temp.row_of(cm.rid) IS DISTINCT FROM b.r ORDER BY cm.pos),
          ARRAY['live', 'cancel', 'live2'],
          'complete_many: the stale (cancel-requested or not), never-had, succeeded and queued elements leave their run as it was');
SELECT is(ARRAY(SELECT cm.label || ': ' || pg_temp.since(cm.rid, :cm_mark) FROM cm ORDER BY cm.pos),
          ARRAY['live: run.succeeded@1', 'stale: run.fenced@1', 'above: ', 'negative: ', 'succeeded: run.fenced@1',
                'queued: run.fenced@0', 'cancel: run.succeeded@1', 'live2: run.succeeded@1',
                'stale_cancel: run.fenced@1'],
          'complete_many: one run.succeeded per completed run, run.fenced for a stale epoch and for runs not running, none for epochs never had');
SELECT is(ARRAY(SELECT e.payload::text FROM runq.run_events AS e JOIN cm ON cm.rid = e.run_id
                 WHERE e.event_id > :cm_mark ORDER BY cm.pos),
          ARRAY['{}', '{"status": "running", "operation": "complete", "current_epoch": 2}',
                '{"status": "succeeded", "operation": "complete", "current_epoch": 1}',
                '{"status": "queued", "operation": "complete", "current_epoch": 0}', '{}', '{}',
                '{"status": "running", "operation": "complete", "current_epoch": 2}'],
          'complete_many: the events carry complete''s payloads');
SELECT is((SELECT string_agg(t.call_id || ':' || t.status, ' ' ORDER BY t.call_id)
             FROM runq.tool_calls AS t JOIN cm ON cm.rid = t.run_id WHERE cm.label = 'cancel'),
          'charge:started lookup:started', 'complete_many: the completed run''s tool calls are left as complete leaves them');

CREATE TEMP TABLE cm_out2 ON COMMIT DROP AS
SELECT o.run_id, o.completed, o.n
  FROM runq.complete_many(ARRAY(SELECT rid FROM cm ORDER BY pos), ARRAY(SELECT ep FROM cm ORDER BY pos),
                          ARRAY(SELECT res FROM cm ORDER BY pos))
       WITH ORDINALITY AS o(run_id, completed, n);
SELECT is((SELECT string_agg(cm.label || ':' || o.completed, ' ' ORDER BY o.n)
             FROM cm_out2 AS o JOIN cm ON cm.pos = o.n AND cm.rid = o.run_id),
          'live:false stale:false above:false negative:false succeeded:false queued:false cancel:false live2:false stale_cancel:false',
          'complete_many again: every element is fenced now');
SELECT is(ARRAY(SELECT cm.label || ': ' || pg_temp.fenced(cm.rid) FROM cm ORDER BY cm.pos),
          ARRAY['live: 1', 'stale: 1', 'above: ', 'negative: ', 'succeeded: 1', 'queued: 0', 'cancel: 1', 'live2: 1',
                'stale_cancel: 1'],
          'complete_many twice: exactly one run.fenced per run and stale epoch, none for an epoch never had');
SELECT is(ARRAY(SELECT cm.label || ': ' || (SELECT count(*) FROM runq.run_events AS e
                                               WHERE e.run_id = cm.rid AND e.type = 'run.succeeded')
                  FROM cm ORDER BY cm.pos),
          ARRAY['live: 1', 'stale: 0', 'above: 0', 'negative: 0', 'succeeded: 1', 'queued: 0', 'cancel: 1', 'live2: 1',
                'stale_cancel: 0'],
          'complete_many twice: one run.succeeded per run, and the first result stands');

SELECT max(event_id) AS cm_one_mark FROM runq.run_events \gset
SELECT clock_timestamp() AS cm_one_t0 \gset
CREATE TEMP TABLE cm_one_out ON COMMIT DROP AS SELECT pos, runq.complete(rid, ep, res) AS completed FROM cm_one;
CREATE TEMP TABLE cm_one_out2 ON COMMIT DROP AS SELECT pos, runq.complete(rid, ep, res) AS completed FROM cm_one;
SELECT is(ARRAY(SELECT o.completed FROM cm_out AS o ORDER BY o.n) || ARRAY(SELECT o.completed FROM cm_out2 AS o ORDER BY o.n),
          ARRAY(SELECT o.completed FROM cm_one_out AS o ORDER BY o.pos)
              || ARRAY(SELECT o.completed FROM cm_one_out2 AS o ORDER BY o.pos),
          'complete_many answers as complete does, element by element, both times');
SELECT is(ARRAY(SELECT pg_temp.trace(cm.rid, :cm_mark, :'cm_t0') FROM cm ORDER BY cm.pos),
          ARRAY(SELECT pg_temp.trace(o.rid, :cm_one_mark, :'cm_one_t0') FROM cm_one AS o ORDER BY o.pos),
          'complete_many leaves the runs, events (type, epoch, payload) and tool calls that complete one by one leaves');

-- ---------------------------------------------------------------------------
-- Every element alive or completed (the fast path), in an order that is not
-- run_id order; results NULL, or with NULL and JSON null elements
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2340) AS a1, pg_temp.running(2341) AS a2, pg_temp.running(2342) AS a3 \gset
SELECT clock_timestamp() AS a_t0 \gset
SELECT results_eq(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s, %s], ARRAY[1, 1, 1])', :a3, :a1, :a2),
                  format('VALUES (%s::bigint, true), (%s, true), (%s, true)', :a3, :a1, :a2),
                  'heartbeat_many of live runs only: true for each, in input order');
SELECT is((SELECT count(*)::int FROM runq.runs AS r
            WHERE r.run_id IN (:a1, :a2, :a3)
              AND r.heartbeat_at > :'a_t0' AND r.lease_expires_at = r.heartbeat_at + r.lease),
          3, 'heartbeat_many of live runs only: each lease is extended by its length from now');
SELECT max(event_id) AS a_mark FROM runq.run_events \gset
SELECT is(pg_temp.since(:a1, :a_mark) || pg_temp.since(:a2, :a_mark) || pg_temp.since(:a3, :a_mark), '',
          'heartbeat_many of live runs only: no event, as heartbeat appends none');
SELECT results_eq(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s], ARRAY[1, 1, 1])', :a2, :a3, :a1),
                  format('VALUES (%s::bigint, true), (%s, true), (%s, true)', :a2, :a3, :a1),
                  'complete_many of live runs only: true for each, in input order');
SELECT is(ARRAY(SELECT format('%s %s', r.status, r.result IS NULL) FROM runq.runs AS r
                 WHERE r.run_id IN (:a1, :a2, :a3) ORDER BY r.run_id),
          ARRAY['succeeded t', 'succeeded t', 'succeeded t'],
          'complete_many without results: each run succeeded with a NULL result');
SELECT is(ARRAY[pg_temp.since(:a1, :a_mark), pg_temp.since(:a2, :a_mark), pg_temp.since(:a3, :a_mark)],
          ARRAY['run.succeeded@1', 'run.succeeded@1', 'run.succeeded@1'],
          'complete_many of live runs only: one run.succeeded each');

SELECT pg_temp.running(2343) AS b1, pg_temp.running(2344) AS b2, pg_temp.running(2345) AS b3,
       pg_temp.running(2346) AS b4 \gset
SELECT results_eq(format($$SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s], ARRAY[1, 1, 1],
                                                            ARRAY['{"a": 1}', NULL, 'null']::jsonb[])$$, :b1, :b2, :b3),
                  format('VALUES (%s::bigint, true), (%s, true), (%s, true)', :b1, :b2, :b3),
                  'complete_many with results: true for each');
SELECT is(ARRAY(SELECT coalesce(r.result::text, 'SQL NULL') FROM runq.runs AS r
                 WHERE r.run_id IN (:b1, :b2, :b3) ORDER BY r.run_id),
          ARRAY['{"a": 1}', 'SQL NULL', 'null'],
          'complete_many: results[i] is run i''s result; a NULL element is a NULL result, JSON null stays JSON null');
SELECT results_eq(format('SELECT * FROM runq.complete_many(ARRAY[%s], ARRAY[1], NULL)', :b4),
                  format('VALUES (%s::bigint, true)', :b4), 'complete_many with results NULL given: true');
SELECT is((SELECT format('%s %s', r.status, r.result IS NULL) FROM runq.runs AS r WHERE r.run_id = :b4),
          'succeeded t', 'complete_many with results NULL given: a NULL result');

-- ---------------------------------------------------------------------------
-- Empty arrays: no rows, no change
-- ---------------------------------------------------------------------------
SELECT max(event_id) AS empty_mark FROM runq.run_events \gset
SELECT is((SELECT count(*)::int FROM runq.heartbeat_many('{}', '{}')), 0, 'heartbeat_many of empty arrays: no rows');
SELECT is((SELECT count(*)::int FROM runq.complete_many('{}', '{}')), 0, 'complete_many of empty arrays: no rows');
SELECT is((SELECT count(*)::int FROM runq.complete_many('{}', '{}', '{}')), 0,
          'complete_many of empty arrays and empty results: no rows');
SELECT is((SELECT count(*)::int FROM runq.run_events WHERE event_id > :empty_mark), 0, 'empty batches append no event');

-- ---------------------------------------------------------------------------
-- Errors: each rejected batch raises, and changes nothing at all, though it
-- holds elements that would have changed their run: two live runs, a
-- cancel-requested one with a started tool call, a stale one
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(2350) AS l1, pg_temp.running(2351) AS l2, pg_temp.running(2352) AS c,
       pg_temp.taken_over(2353) AS s \gset
SELECT runq.begin_tool(:c, 1, 'lookup', 'search', 'read_only') AS c_tool \gset
SELECT runq.cancel(:c) AS c_cancel \gset
-- Everything runq keeps about the fixture's runs.
CREATE FUNCTION pg_temp.world() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT json_agg(r ORDER BY r.run_id)::text FROM runq.runs AS r WHERE r.priority BETWEEN 2350 AND 2359),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e JOIN runq.runs AS r USING (run_id)
          WHERE r.priority BETWEEN 2350 AND 2359),
        (SELECT json_agg(t ORDER BY t.run_id, t.call_id)::text FROM runq.tool_calls AS t JOIN runq.runs AS r USING (run_id)
          WHERE r.priority BETWEEN 2350 AND 2359))
$$;
CREATE TEMP TABLE world_before ON COMMIT DROP AS SELECT pg_temp.world() AS w;

-- NULL arrays
SELECT throws_ok('SELECT * FROM runq.heartbeat_many(NULL, ARRAY[1])', '22023',
                 'run_ids must be a one-dimensional array, got NULL', 'heartbeat_many with NULL run_ids raises 22023');
SELECT throws_ok('SELECT * FROM runq.complete_many(NULL, ARRAY[1])', '22023',
                 'run_ids must be a one-dimensional array, got NULL', 'complete_many with NULL run_ids raises 22023');
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s, %s, %s], NULL)', :l1, :l2, :c, :s), '22023',
                 'epochs must be an array as long as run_ids (4), got NULL',
                 'heartbeat_many with NULL epochs raises 22023');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s, %s], NULL)', :l1, :l2, :c, :s), '22023',
                 'epochs must be an array as long as run_ids (4), got NULL',
                 'complete_many with NULL epochs raises 22023');
SELECT throws_ok('SELECT * FROM runq.heartbeat_many(''{}'', NULL)', '22023',
                 'epochs must be an array as long as run_ids (0), got NULL',
                 'heartbeat_many with empty run_ids and NULL epochs raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'NULL arrays changed nothing');

-- Lengths
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s, %s, %s], ARRAY[1, 1, 1])', :l1, :l2, :c, :s),
                 '22023', 'epochs must be an array as long as run_ids (4), got an array of 3',
                 'heartbeat_many with fewer epochs than run_ids raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'heartbeat_many with fewer epochs changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s], ARRAY[1, 1, 1])', :l1, :l2),
                 '22023', 'epochs must be an array as long as run_ids (2), got an array of 3',
                 'heartbeat_many with more epochs than run_ids (every run live) raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'heartbeat_many with more epochs changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s, %s], ARRAY[1, 1, 1])', :l1, :l2, :c, :s),
                 '22023', 'epochs must be an array as long as run_ids (4), got an array of 3',
                 'complete_many with fewer epochs than run_ids raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with fewer epochs changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[1, 1, 1])', :l1, :l2),
                 '22023', 'epochs must be an array as long as run_ids (2), got an array of 3',
                 'complete_many with more epochs than run_ids (every run live) raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with more epochs changed nothing');
SELECT throws_ok(format($$SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s, %s], ARRAY[1, 1, 1, 1],
                                                           ARRAY['{}', '{}', '{}']::jsonb[])$$, :l1, :l2, :c, :s),
                 '22023', 'results must be NULL or an array as long as run_ids (4), got an array of 3',
                 'complete_many with fewer results than run_ids raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with fewer results changed nothing');
SELECT throws_ok(format($$SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[1, 1],
                                                           ARRAY['{}', '{}', '{}']::jsonb[])$$, :l1, :l2),
                 '22023', 'results must be NULL or an array as long as run_ids (2), got an array of 3',
                 'complete_many with more results than run_ids (every run live) raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with more results changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[1, 1], ''{}'')', :l1, :l2),
                 '22023', 'results must be NULL or an array as long as run_ids (2), got an array of 0',
                 'complete_many with empty results raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with empty results changed nothing');

-- NULL elements
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, NULL, %s, %s], ARRAY[1, 1, 1, 1])', :l1, :c, :s),
                 '22023', 'run_ids must be free of NULLs, got NULL at position 2',
                 'heartbeat_many with a NULL run_id raises 22023 naming its position');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, NULL, %s, %s], ARRAY[1, 1, 1, 1])', :l1, :c, :s),
                 '22023', 'run_ids must be free of NULLs, got NULL at position 2',
                 'complete_many with a NULL run_id raises 22023 naming its position');
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s, %s, %s], ARRAY[1, 1, NULL, 1])', :l1, :l2, :c, :s),
                 '22023', 'epochs must be free of NULLs, got NULL at position 3',
                 'heartbeat_many with a NULL epoch raises 22023 naming its position');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s, %s], ARRAY[1, 1, NULL, 1])', :l1, :l2, :c, :s),
                 '22023', 'epochs must be free of NULLs, got NULL at position 3',
                 'complete_many with a NULL epoch raises 22023 naming its position');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'NULL elements changed nothing');

-- A run twice
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s, %s, %s, %s], ARRAY[1, 1, 1, 1, 1])',
                        :l1, :l2, :c, :s, :l1),
                 '22023', format('run_ids must be free of repeats, got run %s twice', :l1),
                 'heartbeat_many with a run_id given twice raises 22023 naming the run');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'heartbeat_many with a run twice changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s], ARRAY[1, 1])', :l2, :l2),
                 '22023', format('run_ids must be free of repeats, got run %s twice', :l2),
                 'heartbeat_many of one live run twice under its epoch raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'heartbeat_many of one live run twice changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s, %s, %s], ARRAY[1, 1, 1, 1, 1])',
                        :l1, :l2, :c, :s, :l1),
                 '22023', format('run_ids must be free of repeats, got run %s twice', :l1),
                 'complete_many with a run_id given twice raises 22023 naming the run');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with a run twice changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[1, 1])', :l2, :l2),
                 '22023', format('run_ids must be free of repeats, got run %s twice', :l2),
                 'complete_many of one live run twice under its epoch raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many of one live run twice changed nothing');

-- More than one dimension, each element live: only the shape is wrong
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[[%s], [%s]], ARRAY[1, 1])', :l1, :l2),
                 '22023', format('run_ids must be a one-dimensional array, got {{%s},{%s}}', :l1, :l2),
                 'heartbeat_many with two-dimensional run_ids raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'heartbeat_many with two-dimensional run_ids changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[[%s], [%s]], ARRAY[1, 1])', :l1, :l2),
                 '22023', format('run_ids must be a one-dimensional array, got {{%s},{%s}}', :l1, :l2),
                 'complete_many with two-dimensional run_ids raises 22023');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with two-dimensional run_ids changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s], ARRAY[[1], [1]])', :l1, :l2),
                 '22023', NULL, 'heartbeat_many with two-dimensional epochs raises 22023');
SELECT throws_like(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s], ARRAY[[1], [1]])', :l1, :l2),
                   'epochs must be % one-dimensional %',
                   'heartbeat_many with two-dimensional epochs: the message says epochs must be one-dimensional');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'heartbeat_many with two-dimensional epochs changed nothing');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[[1], [1]])', :l1, :l2),
                 '22023', NULL, 'complete_many with two-dimensional epochs raises 22023');
SELECT throws_like(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[[1], [1]])', :l1, :l2),
                   'epochs must be % one-dimensional %',
                   'complete_many with two-dimensional epochs: the message says epochs must be one-dimensional');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with two-dimensional epochs changed nothing');
SELECT throws_ok(format($$SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[1, 1], ARRAY[['{}', '{}']]::jsonb[])$$,
                        :l1, :l2),
                 '22023', NULL, 'complete_many with two-dimensional results raises 22023');
SELECT throws_like(format($$SELECT * FROM runq.complete_many(ARRAY[%s, %s], ARRAY[1, 1], ARRAY[['{}', '{}']]::jsonb[])$$,
                          :l1, :l2),
                   'results must be % one-dimensional %',
                   'complete_many with two-dimensional results: the message says results must be one-dimensional');
SELECT is(pg_temp.world(), (SELECT w FROM world_before), 'complete_many with two-dimensional results changed nothing');

-- A run that does not exist
SELECT throws_ok(format('SELECT * FROM runq.heartbeat_many(ARRAY[%s, %s, %s, %s, -2350], ARRAY[1, 1, 1, 1, 1])',
                        :l1, :l2, :c, :s),
                 'RQ003', 'run -2350 not found', 'heartbeat_many with a run that does not exist raises RQ003 naming it');
SELECT is(pg_temp.world(), (SELECT w FROM world_before),
          'heartbeat_many with a missing run changed nothing: no lease extended, no cancellation, no run.fenced');
SELECT throws_ok(format('SELECT * FROM runq.complete_many(ARRAY[%s, %s, %s, %s, -2350], ARRAY[1, 1, 1, 1, 1])',
                        :l1, :l2, :c, :s),
                 'RQ003', 'run -2350 not found', 'complete_many with a run that does not exist raises RQ003 naming it');
SELECT is(pg_temp.world(), (SELECT w FROM world_before),
          'complete_many with a missing run changed nothing: no run succeeded, no run.fenced');

-- The fixture was live all along: the same elements, well formed, do change it.
SELECT is(ARRAY(SELECT o.alive FROM runq.heartbeat_many(ARRAY[:l1, :l2, :c, :s], ARRAY[1, 1, 1, 1]) AS o),
          ARRAY[true, true, false, false], 'the fixture''s batch, well formed, is answered');
SELECT isnt(pg_temp.world(), (SELECT w FROM world_before), 'and changes the fixture''s runs');

SELECT * FROM finish();
ROLLBACK;
