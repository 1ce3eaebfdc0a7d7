-- Child runs. runq.spawn(run_id, epoch, key, ...) creates a queued child of
-- the caller's run: the parent's tenant, no session, the parent's priority
-- unless given, parent_run_id set; the parent logs run.spawned ({run_id,
-- key}) and the child's run.created names its parent. A key names one child
-- for the parent's whole life: the same key again returns that child and
-- creates nothing, whatever epoch spawned it (a resumed attempt gets the same
-- children); another request under it (kind, payload, priority, max_attempts,
-- recovery_policy, timeout, budget, compared as given: a NULL priority is not
-- the parent's priority given explicitly) is RQ001. Fenced: NULL, one
-- run.fenced, nothing created, whether or not the key exists; a cancel flag
-- cancels the run and a deadline passed fails it (NULL, nothing created).
-- Arguments first: 22023 before the fence and before RQ003. The caps of
-- runq.settings (max_child_depth, max_children) are 22023 too. Usage recorded
-- on a child adds up in every ancestor's totals (get_run, children), each
-- run.usage stays on its run and usage_report counts it once; begin_turn
-- stops a run at its own or any ancestor's budget (budget_exhausted naming
-- that run). A child's deadline is the earlier of its own and its parent's,
-- fixed at spawn. When a parent becomes terminal (complete, fail, a cancel
-- flag met, the sweep: dead letter, deadline), its queued and waiting
-- children are cancelled at once with reason parent_finished, and theirs; a
-- running child gets the cancel flag (reason parent_finished) and ends at its
-- worker's next call, its children then following. Every way a run ends
-- (complete, fail, complete_many, complete_and_claim, cancel, a cancel flag,
-- a budget or a deadline met by the holder's call, a release that orphans
-- it, the sweep's dead letter, cancel, deadline and queue_ttl) cancels its
-- children and wakes its waiting parent. runq.wait_children: the
-- lease ends, status waiting_for_children (no concurrency slot held, not
-- swept for a lease, its session busy: RQ002), run.waiting_for_children
-- {children}; the last child ending requeues it (attempts reset,
-- run.children_done) for a resumed claim; an empty wait requeues it at once
-- with its attempts kept; cancel and deadline apply as to a waiting run.
-- runq.children(run_id): the direct children in spawn order, as
-- runq.child_info. get_run, list_runs and dead_letter end with parent_run_id;
-- queue_stats ends with waiting_for_children; list_runs filters by it. A
-- redrive of a child whose parent is terminal is RQ004 naming the parent;
-- purge of a parent leaves its children's rows. Grants. Deadlines and leases
-- are moved by UPDATE of runq.runs inside this transaction, never waited for.
-- Classes 4100..4199; tenants 'ch', 'ch-b' and 'ch-lim'.
BEGIN;
SELECT plan(414);

\ir helpers/recovery.sql

-- A queued root run of this file's class p_class; its id.
CREATE FUNCTION pg_temp.run(p_class integer, p_kind text DEFAULT 'parent', p_timeout interval DEFAULT NULL,
                            p_budget jsonb DEFAULT NULL, p_session text DEFAULT NULL,
                            p_tenant text DEFAULT 'ch', p_max_attempts integer DEFAULT 3)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT s.run_id FROM runq.submit(tenant_id => p_tenant, kind => p_kind, priority => p_class,
                                     session_id => p_session, max_attempts => p_max_attempts,
                                     budget => p_budget, timeout => p_timeout) AS s
$$;
-- Claims the queued run p_run (the test keeps it the oldest ready run of its
-- class and kind) with an hour's lease; the epoch of the claim.
CREATE FUNCTION pg_temp.take(p_run bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_class integer;
    v_kind  text;
    v_got   bigint;
    v_epoch bigint;
BEGIN
    SELECT r.priority, r.kind INTO v_class, v_kind
      FROM runq.runs AS r WHERE r.run_id = p_run AND r.status = 'queued';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % is not queued', p_run;
    END IF;
    SELECT c.run_id, c.epoch INTO v_got, v_epoch
      FROM runq.claim(ARRAY[v_class], 'w-ch', interval '1 hour', 1, ARRAY[v_kind]) AS c;
    IF v_got IS DISTINCT FROM p_run THEN
        RAISE EXCEPTION 'fixture: the claim took run % instead of run %', v_got, p_run;
    END IF;
    RETURN v_epoch;
END
$$;
-- A root run claimed under epoch 1 with an hour's lease.
CREATE FUNCTION pg_temp.running(p_class integer, p_kind text DEFAULT 'parent', p_timeout interval DEFAULT NULL,
                                p_budget jsonb DEFAULT NULL, p_session text DEFAULT NULL,
                                p_tenant text DEFAULT 'ch', p_max_attempts integer DEFAULT 3)
    RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint := pg_temp.run(p_class, p_kind, p_timeout, p_budget, p_session, p_tenant, p_max_attempts);
BEGIN
    IF pg_temp.take(v_run) <> 1 THEN
        RAISE EXCEPTION 'fixture: run % was not claimed under epoch 1', v_run;
    END IF;
    RETURN v_run;
END
$$;
-- A child spawned by p_parent under epoch 1, then claimed under epoch 1.
CREATE FUNCTION pg_temp.child(p_parent bigint, p_key text, p_kind text, p_budget jsonb DEFAULT NULL)
    RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_child bigint := runq.spawn(p_parent, 1, p_key, p_kind, budget => p_budget);
BEGIN
    IF v_child IS NULL THEN
        RAISE EXCEPTION 'fixture: run % did not spawn %', p_parent, p_key;
    END IF;
    IF pg_temp.take(v_child) <> 1 THEN
        RAISE EXCEPTION 'fixture: child % was not claimed under epoch 1', v_child;
    END IF;
    RETURN v_child;
END
$$;
-- The run's lease expires, the sweep requeues it (policy resume), its backoff
-- is skipped and it is claimed again; the epoch of that claim.
CREATE FUNCTION pg_temp.reclaimed(p_run bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runq.runs SET lease_expires_at = now() - interval '1 second'
     WHERE run_id = p_run AND status = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: run % is not running', p_run;
    END IF;
    PERFORM FROM runq.sweep() AS s WHERE s.run_id = p_run AND s.action = 'requeued';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: the sweep did not requeue run %', p_run;
    END IF;
    UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = p_run;  -- skip the backoff
    RETURN pg_temp.take(p_run);
END
$$;
CREATE FUNCTION pg_temp.status(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT g.status FROM runq.get_run(p_run) AS g
$$;
-- The runs whose parent is p_run, read from the table, in run_id order.
CREATE FUNCTION pg_temp.children_of(p_run bigint) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(r.run_id ORDER BY r.run_id), '{}') FROM runq.runs AS r WHERE r.parent_run_id = p_run
$$;
-- The payloads of a run's events of one type, in order.
CREATE FUNCTION pg_temp.payloads(p_run bigint, p_type text) RETURNS jsonb[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(e.payload ORDER BY e.event_id), '{}')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = p_type
$$;
-- The newest event of a run as 'type@epoch'.
CREATE FUNCTION pg_temp.last_event(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT e.type || '@' || e.epoch FROM runq.run_events AS e WHERE e.run_id = p_run
     ORDER BY e.event_id DESC LIMIT 1
$$;
-- The reason of a run's newest run.cancelled or run.cancel_requested, as
-- 'type reason'; NULL when it has none.
CREATE FUNCTION pg_temp.reason(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT e.type || ' ' || coalesce(e.payload ->> 'reason', '-') FROM runq.run_events AS e
     WHERE e.run_id = p_run AND e.type IN ('run.cancelled', 'run.cancel_requested')
     ORDER BY e.event_id DESC LIMIT 1
$$;
-- A run's run.fenced events as 'operation@epoch', in order.
CREATE FUNCTION pg_temp.fenced(p_run bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((e.payload ->> 'operation') || '@' || e.epoch ORDER BY e.event_id), '{}')
      FROM runq.run_events AS e WHERE e.run_id = p_run AND e.type = 'run.fenced'
$$;
CREATE FUNCTION pg_temp.usage(p_run bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT r.usage FROM runq.get_run(p_run) AS r
$$;
CREATE FUNCTION pg_temp.failure(p_run bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT r.failure FROM runq.get_run(p_run) AS r
$$;
-- Everything runq keeps about a run that a refused call could touch: its row,
-- its events, its usage totals, its children.
CREATE FUNCTION pg_temp.state(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT row_to_json(r)::text FROM runq.runs AS r WHERE r.run_id = p_run),
        (SELECT json_agg(e ORDER BY e.event_id)::text FROM runq.run_events AS e WHERE e.run_id = p_run),
        (SELECT row_to_json(u)::text FROM runq.run_usage AS u WHERE u.run_id = p_run),
        pg_temp.children_of(p_run)::text)
$$;
CREATE TEMP TABLE before (run_id bigint PRIMARY KEY, s text) ON COMMIT DROP;
CREATE FUNCTION pg_temp.remember(p_run bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO before VALUES (p_run, pg_temp.state(p_run))
        ON CONFLICT (run_id) DO UPDATE SET s = excluded.s;
$$;
CREATE FUNCTION pg_temp.remembered(p_run bigint) RETURNS text LANGUAGE sql AS $$
    SELECT b.s FROM before AS b WHERE b.run_id = p_run
$$;

-- A family for the cascade, its members named in the temp table nodes:
--   p    the parent, running under epoch 1;
--   q    a queued child;
--   w    a child waiting_for_user, with wg, its own queued child;
--   wc   a child waiting_for_children, for wcg, its own queued child;
--   r    a running child, with rg, its own queued child;
--   d    a child that succeeded.
-- Every member's kind is the scenario's name and its own, so each is claimed
-- by name; the children have the parent's class.
CREATE TEMP TABLE nodes (scn text, name text, run_id bigint, PRIMARY KEY (scn, name)) ON COMMIT DROP;
CREATE FUNCTION pg_temp.family(p_scn text, p_class integer, p_timeout interval DEFAULT NULL)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_p   bigint := pg_temp.running(p_class, p_scn || '-p', p_timeout);
    v_q   bigint;
    v_w   bigint;
    v_wg  bigint;
    v_wc  bigint;
    v_wcg bigint;
    v_r   bigint;
    v_rg  bigint;
    v_d   bigint;
BEGIN
    v_q := runq.spawn(v_p, 1, 'q', p_scn || '-q');
    v_w := pg_temp.child(v_p, 'w', p_scn || '-w');
    v_wg := runq.spawn(v_w, 1, 'g', p_scn || '-wg');
    v_wc := pg_temp.child(v_p, 'wc', p_scn || '-wc');
    v_wcg := runq.spawn(v_wc, 1, 'g', p_scn || '-wcg');
    v_r := pg_temp.child(v_p, 'r', p_scn || '-r');
    v_rg := runq.spawn(v_r, 1, 'g', p_scn || '-rg');
    v_d := pg_temp.child(v_p, 'd', p_scn || '-d');
    IF v_q IS NULL OR v_wg IS NULL OR v_wcg IS NULL OR v_rg IS NULL
       OR NOT runq.ask_user(v_w, 1, '{"q": "?"}')
       OR NOT runq.wait_children(v_wc, 1)
       OR NOT runq.complete(v_d, 1, '{"done": true}') THEN
        RAISE EXCEPTION 'fixture: the family of % could not be made', p_scn;
    END IF;
    INSERT INTO nodes VALUES (p_scn, 'p', v_p), (p_scn, 'q', v_q), (p_scn, 'w', v_w), (p_scn, 'wg', v_wg),
                             (p_scn, 'wc', v_wc), (p_scn, 'wcg', v_wcg), (p_scn, 'r', v_r), (p_scn, 'rg', v_rg),
                             (p_scn, 'd', v_d);
END
$$;
CREATE FUNCTION pg_temp.n(p_scn text, p_name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT n.run_id FROM nodes AS n WHERE n.scn = p_scn AND n.name = p_name
$$;
-- Each member as 'name status', ' (cancel requested)' added for the flag of
-- a run that has not ended (a cancelled run keeps its flag set).
CREATE FUNCTION pg_temp.family_state(p_scn text) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(n.name || ' ' || r.status
                     || CASE WHEN r.cancel_requested AND r.finished_at IS NULL THEN ' (cancel requested)' ELSE '' END
                     ORDER BY n.name)
      FROM nodes AS n JOIN runq.runs AS r ON r.run_id = n.run_id WHERE n.scn = p_scn
$$;
-- Each child and grandchild as 'name', then its pg_temp.reason, or '-'.
CREATE FUNCTION pg_temp.family_reasons(p_scn text) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(n.name || ' ' || coalesce(pg_temp.reason(n.run_id), '-') ORDER BY n.name)
      FROM nodes AS n WHERE n.scn = p_scn AND n.name NOT IN ('p', 'd')
$$;

-- A chain: g, running, waits for its one child x; x has a queued child y
-- and is left running, or queued (released after spawning), waiting_for_user
-- or waiting_for_children (for y); x takes the spawn arguments given. Named
-- in nodes, like a family.
CREATE FUNCTION pg_temp.chain(p_scn text, p_class integer, p_state text DEFAULT 'running',
                              p_budget jsonb DEFAULT NULL, p_timeout interval DEFAULT NULL,
                              p_policy text DEFAULT 'resume', p_max_attempts integer DEFAULT 3)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_g bigint := pg_temp.running(p_class, p_scn || '-g');
    v_x bigint;
    v_y bigint;
BEGIN
    v_x := runq.spawn(v_g, 1, 'x', p_scn || '-x', '{}', NULL, p_max_attempts, p_policy, p_timeout, p_budget);
    IF pg_temp.take(v_x) <> 1 THEN
        RAISE EXCEPTION 'fixture: % was not claimed', v_x;
    END IF;
    v_y := runq.spawn(v_x, 1, 'y', p_scn || '-y');
    IF v_y IS NULL
       OR (p_state = 'queued' AND NOT runq.release(v_x, 1))
       OR (p_state = 'waiting_for_user' AND NOT runq.ask_user(v_x, 1, '{"q": 1}'))
       OR (p_state = 'waiting_for_children' AND NOT runq.wait_children(v_x, 1))
       OR NOT runq.wait_children(v_g, 1)
       OR pg_temp.status(v_x) <> p_state OR pg_temp.status(v_g) <> 'waiting_for_children' THEN
        RAISE EXCEPTION 'fixture: the chain % could not be made', p_scn;
    END IF;
    INSERT INTO nodes VALUES (p_scn, 'g', v_g), (p_scn, 'x', v_x), (p_scn, 'y', v_y);
END
$$;
-- x as 'x status'; y as 'y status' and its pg_temp.reason; g as 'g status'
-- and, once requeued, its newest event and attempts.
CREATE FUNCTION pg_temp.chain_state(p_scn text) RETURNS text[] LANGUAGE sql AS $$
    SELECT ARRAY[
        'x ' || pg_temp.status(pg_temp.n(p_scn, 'x')),
        'y ' || pg_temp.status(pg_temp.n(p_scn, 'y')) || coalesce(' ' || pg_temp.reason(pg_temp.n(p_scn, 'y')), ''),
        'g ' || g.status || CASE WHEN g.status = 'queued'
                                 THEN format(' %s attempts %s', pg_temp.last_event(g.run_id), g.attempts) ELSE '' END]
      FROM runq.get_run(pg_temp.n(p_scn, 'g')) AS g
$$;

-- fixture: no old finished runs, so that purge's counts below are this
-- file's (rolled back with everything else).
SELECT runq.purge(interval '1 day', 2147483647, true) AS pre_purged \gset

-- ---------------------------------------------------------------------------
-- The signatures, the row types
-- ---------------------------------------------------------------------------
SELECT is(pg_catalog.pg_get_function_arguments('runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb)'::regprocedure),
          'run_id bigint, epoch bigint, key text, kind text, payload jsonb DEFAULT ''{}''::jsonb, '
          'priority integer DEFAULT NULL::integer, max_attempts integer DEFAULT 3, '
          'recovery_policy text DEFAULT ''resume''::text, timeout interval DEFAULT NULL::interval, '
          'budget jsonb DEFAULT NULL::jsonb',
          'spawn: its parameter names, types and defaults');
SELECT is(pg_catalog.pg_get_function_result('runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb)'::regprocedure),
          'bigint', 'spawn returns bigint');
SELECT is(pg_catalog.pg_get_function_arguments('runq.wait_children(bigint, bigint)'::regprocedure),
          'run_id bigint, epoch bigint', 'wait_children: run_id, epoch');
SELECT is(pg_catalog.pg_get_function_result('runq.wait_children(bigint, bigint)'::regprocedure),
          'boolean', 'wait_children returns boolean');
SELECT is(pg_catalog.pg_get_function_arguments('runq.children(bigint)'::regprocedure),
          'run_id bigint', 'children: run_id');
SELECT is(pg_catalog.pg_get_function_result('runq.children(bigint)'::regprocedure),
          'SETOF runq.child_info', 'children returns SETOF runq.child_info');
SELECT is((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
             FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid = 'runq.child_info'::regclass AND a.attnum > 0 AND NOT a.attisdropped),
          'key text, run_id bigint, kind text, status text, result jsonb, failure jsonb, usage jsonb',
          'runq.child_info: key, run_id, kind, status, result, failure, usage');
SELECT is((SELECT array_agg(x.col ORDER BY x.attnum)
             FROM (SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) AS col, a.attnum
                     FROM pg_catalog.pg_attribute AS a
                    WHERE a.attrelid = 'runq.run_info'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                    ORDER BY a.attnum DESC LIMIT 2) AS x),
          ARRAY['deadline timestamp with time zone', 'parent_run_id bigint'],
          'runq.run_info ends with parent_run_id bigint, right after deadline');
SELECT is((SELECT array_agg(a.attname::text ORDER BY a.attnum)
             FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid = 'runq.queue_stats'::regclass AND a.attnum > 0 AND NOT a.attisdropped),
          ARRAY['priority', 'ready', 'scheduled', 'running', 'waiting_for_user', 'failed', 'oldest_ready_age',
                'waiting_for_children'],
          'queue_stats: its columns as before, waiting_for_children appended last');

-- ---------------------------------------------------------------------------
-- spawn: a queued child of the caller's run
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4100, p_session => 'ch-s1') AS p \gset
SELECT runq.spawn(:p, 1, 'k1', 'ch-a', '{"n": 1}') AS c1 \gset
SELECT isnt(nullif(:'c1', '')::bigint, NULL, 'spawn with the defaults returns the child''s run_id');
SELECT results_eq(format('SELECT tenant_id, session_id, kind, status, priority, attempts, max_attempts, lease_epoch,
                                 scheduled_for, cancel_requested, result, failure, usage, budget, deadline, parent_run_id
                            FROM runq.get_run(%s)', :c1),
                  format($$VALUES ('ch'::text, NULL::text, 'ch-a'::text, 'queued'::text, 4100, 0, 3, 0::bigint,
                                   NULL::timestamptz, false, NULL::jsonb, NULL::jsonb, '{}'::jsonb, NULL::jsonb,
                                   NULL::timestamptz, %s::bigint)$$, :p),
                  'the child: the parent''s tenant, no session, the parent''s priority, queued, never claimed, '
                  'max_attempts 3, no budget, no deadline, parent_run_id the parent');
SELECT results_eq(format('SELECT payload::jsonb, recovery_policy::text, timeout FROM runq.runs WHERE run_id = %s', :c1),
                  $$VALUES ('{"n": 1}'::jsonb, 'resume'::text, NULL::interval)$$,
                  'the child keeps the payload given, policy resume, no timeout');
SELECT is(pg_temp.events(:c1), ARRAY['run.created@0'], 'the child logs run.created under epoch 0');
SELECT ok((pg_temp.payloads(:c1, 'run.created'))[1] @> format('{"kind": "ch-a", "priority": 4100, "parent_run_id": %s}', :p)::jsonb,
          'its run.created payload names its kind, priority and parent');
SELECT ok(NOT (pg_temp.payloads(:c1, 'run.created'))[1] ? 'session_id', 'and no session');

SELECT runq.spawn(:p, 1, 'k2', 'ch-b', '{}', 4101, 5, 'fail', interval '1 hour', '{"tokens": 100}') AS c2 \gset
SELECT results_eq(format('SELECT tenant_id, session_id, priority, max_attempts, budget, deadline - created_at, parent_run_id
                            FROM runq.get_run(%s)', :c2),
                  format($$VALUES ('ch'::text, NULL::text, 4101, 5, '{"tokens": 100}'::jsonb, interval '1 hour', %s::bigint)$$, :p),
                  'a child given every argument: its priority, max_attempts, budget, and deadline = created_at + timeout');
SELECT results_eq(format('SELECT recovery_policy::text, timeout FROM runq.runs WHERE run_id = %s', :c2),
                  $$VALUES ('fail'::text, interval '1 hour')$$, 'its recovery_policy and timeout');
SELECT is(pg_temp.events(:p), ARRAY['run.created@0', 'run.claimed@1', 'run.spawned@1', 'run.spawned@1'],
          'the parent logs one run.spawned per child, under its epoch');
SELECT is(pg_temp.payloads(:p, 'run.spawned'),
          ARRAY[format('{"run_id": %s, "key": "k1"}', :c1)::jsonb, format('{"run_id": %s, "key": "k2"}', :c2)::jsonb],
          'run.spawned names the child and its key');
SELECT results_eq(format('SELECT status, attempts, lease_epoch FROM runq.get_run(%s)', :p),
                  $$VALUES ('running'::text, 1, 1::bigint)$$, 'the parent goes on running under epoch 1');
SELECT is(pg_temp.children_of(:p), ARRAY[:c1, :c2]::bigint[], 'two runs name the parent');
SELECT is((SELECT parent_run_id FROM runq.get_run(:p)), NULL::bigint, 'a root run has no parent_run_id');

-- The same key again, under the same epoch: the same child, nothing created.
SELECT pg_temp.remember(:p);
SELECT pg_temp.remember(:c1);
SELECT is(runq.spawn(:p, 1, 'k1', 'ch-a', '{"n": 1}'), :c1::bigint, 'the same key and request again: the same child');
SELECT is(runq.spawn(:p, 1, 'k1', 'ch-a', '{"n": 1}', NULL, 3, 'resume', NULL, NULL), :c1::bigint,
          'the defaults given explicitly are the same request');
SELECT is(runq.spawn(:p, 1, 'k2', 'ch-b', '{}', 4101, 5, 'fail', interval '1 hour', '{"tokens": 100}'), :c2::bigint,
          'the second key and its request again: the second child');
SELECT is(pg_temp.state(:p), pg_temp.remembered(:p), 'the repeats changed nothing in the parent: no run.spawned, no child');
SELECT is(pg_temp.state(:c1), pg_temp.remembered(:c1), 'nor in the child');

-- Another request under a key: RQ001, nothing changed.
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-other', '{"n": 1}')$$, :p), 'RQ001',
                 format('child key ''k1'' of run %s was used for another request', :p),
                 'the key with another kind: RQ001 naming the key and the parent');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-a', '{"n": 2}')$$, :p), 'RQ001', NULL,
                 'the key with another payload: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-a', '{"n": 1}', 4100)$$, :p), 'RQ001', NULL,
                 'the key with the parent''s priority given explicitly where none was: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-a', '{"n": 1}', max_attempts => 4)$$, :p), 'RQ001', NULL,
                 'the key with another max_attempts: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-a', '{"n": 1}', recovery_policy => 'fail')$$, :p), 'RQ001', NULL,
                 'the key with another recovery_policy: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-a', '{"n": 1}', timeout => '1 hour')$$, :p), 'RQ001', NULL,
                 'the key with a timeout: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-a', '{"n": 1}', budget => '{"tokens": 1}')$$, :p), 'RQ001', NULL,
                 'the key with a budget: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k2', 'ch-b', '{}', NULL, 5, 'fail', '1 hour', '{"tokens": 100}')$$, :p),
                 'RQ001', NULL, 'a key spawned with a priority, spawned again without one: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k2', 'ch-b', '{}', 4101, 5, 'fail', '2 hours', '{"tokens": 100}')$$, :p),
                 'RQ001', NULL, 'the second key with another timeout: RQ001');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k2', 'ch-b', '{}', 4101, 5, 'fail', '1 hour', '{"tokens": 101}')$$, :p),
                 'RQ001', NULL, 'the second key with another budget: RQ001');
SELECT runq.spawn(:p, 1, 'k3', 'ch-c', priority => 4100) AS c3 \gset
SELECT is((SELECT priority FROM runq.get_run(:c3)), 4100, 'a child given the parent''s priority explicitly');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k3', 'ch-c')$$, :p), 'RQ001', NULL,
                 'spawned again without a priority: RQ001 (compared as given)');
SELECT pg_temp.remember(:p);
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k1', 'ch-a', '{"n": 3}')$$, :p), 'RQ001', NULL,
                 'RQ001 once more');
SELECT is(pg_temp.state(:p), pg_temp.remembered(:p), 'the refused spawns changed nothing: no event, no child');
SELECT is(pg_temp.children_of(:p), ARRAY[:c1, :c2, :c3]::bigint[], 'the parent has its three children');

-- A key names a child among its parent's children only.
SELECT pg_temp.running(4100, 'parent-2') AS p2 \gset
SELECT runq.spawn(:p2, 1, 'k1', 'ch-a', '{"n": 1}') AS p2c1 \gset
SELECT ok(:p2c1 NOT IN (:c1, :c2, :c3), 'another parent''s key k1 is another child');
SELECT is(pg_temp.children_of(:p2), ARRAY[:p2c1]::bigint[], 'the other parent has that one child');

-- The children are claimable at once; a child spawns in turn, its own
-- priority passed on.
SELECT is(pg_temp.take(:c2), 1::bigint, 'the child is claimed at once, under epoch 1');
SELECT is((SELECT resumed FROM runq.claim(ARRAY[4100], 'w-ch', interval '1 hour', 1, ARRAY['ch-a'])), false,
          'the other child''s first claim is not a resumed one');
SELECT runq.spawn(:c2, 1, 'g', 'ch-g') AS g1 \gset
SELECT results_eq(format('SELECT tenant_id, priority, parent_run_id FROM runq.get_run(%s)', :g1),
                  format($$VALUES ('ch'::text, 4101, %s::bigint)$$, :c2),
                  'a grandchild: the tenant, the child''s own priority, the child as its parent');
SELECT is(pg_temp.children_of(:p), ARRAY[:c1, :c2, :c3]::bigint[], 'the grandchild is not the root''s child');

-- ---------------------------------------------------------------------------
-- spawn across epochs, and fenced
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4102) AS e \gset
SELECT runq.spawn(:e, 1, 'k1', 'ch-e1', '{"v": 1}') AS e1 \gset
SELECT is(pg_temp.reclaimed(:e), 2::bigint,
          'fixture: the lease expired, the sweep requeued the parent, and it was claimed again under epoch 2');
SELECT is(pg_temp.status(:e1), 'queued', 'the parent''s requeue left its child queued');
SELECT is(runq.spawn(:e, 2, 'k1', 'ch-e1', '{"v": 1}'), :e1::bigint,
          'the resumed attempt spawns the same key: the child epoch 1 spawned');
SELECT is(pg_temp.children_of(:e), ARRAY[:e1]::bigint[], 'and nothing was created');
SELECT is(cardinality(pg_temp.payloads(:e, 'run.spawned')), 1, 'nor logged: one run.spawned');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 2, 'k1', 'ch-e1', '{"v": 2}')$$, :e), 'RQ001', NULL,
                 'the resumed attempt with another request under the key: RQ001');
SELECT runq.spawn(:e, 2, 'k2', 'ch-e2') AS e2 \gset
SELECT is(pg_temp.events(:e), ARRAY['run.created@0', 'run.claimed@1', 'run.spawned@1', 'run.requeued@1',
                                    'run.claimed@2', 'run.spawned@2'],
          'a new key under epoch 2: run.spawned@2');

SELECT is(runq.spawn(:e, 1, 'k3', 'ch-e3'), NULL::bigint, 'the stale epoch 1 spawns a new key: NULL');
SELECT is(runq.spawn(:e, 1, 'k1', 'ch-e1', '{"v": 1}'), NULL::bigint, 'the stale epoch spawns an existing key: NULL too');
SELECT is(runq.spawn(:e, 1, 'k1', 'ch-other'), NULL::bigint,
          'and an existing key with another request: NULL, not RQ001 (fencing comes first)');
SELECT is(pg_temp.children_of(:e), ARRAY[:e1, :e2]::bigint[], 'the fenced spawns created nothing');
SELECT is(pg_temp.fenced(:e), ARRAY['spawn@1'], 'one run.fenced for epoch 1 after three stale spawns, operation spawn');
SELECT is((pg_temp.payloads(:e, 'run.fenced'))[1], '{"operation": "spawn", "current_epoch": 2, "status": "running"}'::jsonb,
          'the run.fenced payload: operation spawn, the current epoch and status');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, NULL, 'ch-e3')$$, :e), '22023',
                 'key must be 1 to 256 characters, got NULL',
                 'a stale epoch with a bad key: 22023 all the same (arguments before the fence)');
SELECT is(runq.spawn(:e, 7, 'k4', 'ch-e4'), NULL::bigint, 'an epoch the run never had: NULL');
SELECT is(runq.spawn(:e, -1, 'k4', 'ch-e4'), NULL::bigint, 'a negative epoch: NULL');
SELECT is(pg_temp.children_of(:e), ARRAY[:e1, :e2]::bigint[], 'and nothing created');
SELECT results_eq(format('SELECT status, lease_epoch FROM runq.get_run(%s)', :e), $$VALUES ('running'::text, 2::bigint)$$,
                  'the parent goes on under epoch 2');

SELECT is(runq.complete(:e, 2), true, 'the parent succeeds');
SELECT is(runq.spawn(:e, 2, 'k1', 'ch-e1', '{"v": 1}'), NULL::bigint, 'a spawn by a finished run''s epoch: NULL');
SELECT is(runq.spawn(:e, 2, 'k5', 'ch-e5'), NULL::bigint, 'with a new key too');
SELECT is(pg_temp.children_of(:e), ARRAY[:e1, :e2]::bigint[], 'nothing created');
SELECT is(pg_temp.fenced(:e), ARRAY['spawn@1', 'spawn@2'], 'one run.fenced for epoch 2');

SELECT pg_temp.run(4102, 'ch-queued') AS eq \gset
SELECT is(runq.spawn(:eq, 0, 'k', 'ch-x'), NULL::bigint, 'a queued run (epoch 0) cannot spawn: NULL');
SELECT is(pg_temp.children_of(:eq), '{}'::bigint[], 'nothing created');

-- ---------------------------------------------------------------------------
-- spawn's arguments: 22023 before the fence and the lookup; RQ003
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4103) AS a \gset
SELECT pg_temp.remember(:a);
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, NULL, 'ch-k')$$, :a), '22023',
                 'key must be 1 to 256 characters, got NULL', 'key NULL is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, '', 'ch-k')$$, :a), '22023',
                 'key must be 1 to 256 characters, got ''''', 'an empty key is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, repeat('k', 257), 'ch-k')$$, :a), '22023',
                 'key must be 1 to 256 characters, got ''' || repeat('k', 100) || '''',
                 'a key of 257 characters is 22023, the value cut to 100');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', NULL)$$, :a), '22023',
                 'kind must be 1 to 256 characters, got NULL', 'kind NULL is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', '')$$, :a), '22023',
                 'kind must be 1 to 256 characters, got ''''', 'an empty kind is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', repeat('x', 257))$$, :a), '22023',
                 'kind must be 1 to 256 characters, got ''' || repeat('x', 100) || '''', 'a kind of 257 characters is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', NULL)$$, :a), '22023',
                 'payload must be a jsonb object, got NULL', 'payload NULL (explicit) is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', '[1]')$$, :a), '22023',
                 'payload must be a jsonb object, got array', 'a payload that is no object is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', '{}', -1)$$, :a), '22023',
                 'priority must be NULL or between 0 and 32767, got -1', 'priority -1 is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', '{}', 32768)$$, :a), '22023',
                 'priority must be NULL or between 0 and 32767, got 32768', 'priority 32768 is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', '{}', NULL, 0)$$, :a), '22023',
                 'max_attempts must be at least 1, got 0', 'max_attempts 0 is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', '{}', NULL, NULL)$$, :a), '22023',
                 'max_attempts must be at least 1, got NULL', 'max_attempts NULL is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', '{}', NULL, 3, 'sometimes')$$, :a), '22023',
                 'recovery_policy must be one of resume, fail, zero_work, got ''sometimes''',
                 'an unknown recovery_policy is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', '{}', NULL, 3, NULL)$$, :a), '22023',
                 'recovery_policy must be one of resume, fail, zero_work, got NULL', 'recovery_policy NULL is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', timeout => '0')$$, :a), '22023',
                 'timeout must be positive and under 1000 years, got 00:00:00', 'timeout 0 is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', timeout => '-1 hour')$$, :a), '22023',
                 'timeout must be positive and under 1000 years, got -01:00:00', 'a negative timeout is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', budget => '{}')$$, :a), '22023',
                 'budget must be NULL or a non-empty object of non-negative numbers, got {}', 'budget {} is 22023 naming it');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'k', 'ch-k', budget => '{"tokens": -1}')$$, :a), '22023',
                 'budget must be NULL or a non-empty object of non-negative numbers, got {"tokens": -1}',
                 'a negative budget is 22023');
SELECT throws_ok(format($$SELECT runq.spawn(%s, NULL, 'k', 'ch-k')$$, :a), '22023',
                 'epoch must be given, got NULL', 'epoch NULL is 22023 naming it');
SELECT throws_ok($$SELECT runq.spawn(NULL, 1, 'k', 'ch-k')$$, '22023',
                 'run_id must be given, got NULL', 'run_id NULL is 22023, as in every lookup');
SELECT throws_ok($$SELECT runq.spawn(-4100, 1, 'k', 'ch-k')$$, 'RQ003', 'run -4100 not found',
                 'no such run is RQ003 naming it');
SELECT throws_ok($$SELECT runq.spawn(-4100, 1, 'k', 'ch-k', '[]')$$, '22023', 'payload must be a jsonb object, got array',
                 'a bad argument for no such run is still 22023: arguments first');
SELECT is(pg_temp.state(:a), pg_temp.remembered(:a), 'the refused spawns changed nothing');
SELECT isnt(runq.spawn(:a, 1, repeat('k', 256), repeat('x', 256)), NULL::bigint,
            'a key and a kind of 256 characters are accepted');

-- ---------------------------------------------------------------------------
-- spawn honours a cancel flag and the deadline
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4104) AS fc \gset
SELECT runq.spawn(:fc, 1, 'x', 'ch-x') AS fc1 \gset
SELECT is(runq.cancel(:fc, 'enough'), 'cancel_requested', 'cancel flag: requested of the running parent');
SELECT is(pg_temp.status(:fc1), 'queued', 'cancel flag: the flag alone leaves the child queued');
SELECT is(runq.spawn(:fc, 1, 'y', 'ch-y'), NULL::bigint, 'cancel flag: spawn of a new key returns NULL');
SELECT is(pg_temp.status(:fc), 'cancelled', 'cancel flag: the parent is cancelled');
SELECT is((pg_temp.payloads(:fc, 'run.cancelled'))[1], '{"reason": "cancel_requested", "observed_by": "spawn"}'::jsonb,
          'cancel flag: run.cancelled observed by spawn');
SELECT is(pg_temp.children_of(:fc), ARRAY[:fc1]::bigint[], 'cancel flag: nothing created');
SELECT is(pg_temp.fenced(:fc), '{}'::text[], 'cancel flag: no run.fenced');

SELECT pg_temp.running(4104, 'parent-k') AS fk \gset
SELECT runq.spawn(:fk, 1, 'x', 'ch-kx') AS fk1 \gset
SELECT is(runq.cancel(:fk), 'cancel_requested', 'cancel flag, existing key: requested');
SELECT is(runq.spawn(:fk, 1, 'x', 'ch-kx'), NULL::bigint, 'cancel flag: a spawn of the key it already used returns NULL too');
SELECT is(pg_temp.status(:fk), 'cancelled', 'cancel flag, existing key: the parent is cancelled');
SELECT is(pg_temp.children_of(:fk), ARRAY[:fk1]::bigint[], 'cancel flag, existing key: nothing created');

SELECT pg_temp.running(4105, p_timeout => interval '1 hour') AS fd \gset
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = :fd;
SELECT is(runq.spawn(:fd, 1, 'x', 'ch-x'), NULL::bigint, 'deadline passed: spawn returns NULL');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :fd),
                  $$VALUES ('failed'::text, 'deadline_exceeded'::text)$$, 'deadline passed: the parent failed, deadline_exceeded');
SELECT ok(pg_temp.failure_complete(:fd), 'deadline passed: a complete failure record');
SELECT is(pg_temp.children_of(:fd), '{}'::bigint[], 'deadline passed: nothing created');

-- ---------------------------------------------------------------------------
-- The caps: max_child_depth and max_children
-- ---------------------------------------------------------------------------
SELECT results_eq('SELECT max_child_depth, max_children FROM runq.settings', 'VALUES (8::bigint, 10000::bigint)',
                  'settings: max_child_depth 8 and max_children 10000 by default');
SELECT max_child_depth AS depth0, max_children AS fan0 FROM runq.settings \gset
UPDATE runq.settings SET max_child_depth = 2, max_children = 3;
SELECT pg_temp.running(4110, 'cap-root') AS r0 \gset
SELECT pg_temp.child(:r0, 'd', 'cap-d1') AS d1 \gset
SELECT pg_temp.child(:d1, 'd', 'cap-d2') AS d2 \gset
SELECT is((SELECT parent_run_id FROM runq.get_run(:d2)), :d1::bigint, 'depth 2 (of 2): the child of a child is spawned');
SELECT pg_temp.remember(:d2);
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'd', 'cap-d3')$$, :d2), '22023',
                 format('run %s is at depth 2: a child of it would be at depth 3, deeper than runq.settings.max_child_depth (2)', :d2),
                 'depth 3 over max_child_depth 2: 22023 naming the depth and the cap');
SELECT is(pg_temp.state(:d2), pg_temp.remembered(:d2), 'the refused spawn changed nothing');
SELECT runq.spawn(:r0, 1, 'f2', 'cap-f') AS f2 \gset
SELECT runq.spawn(:r0, 1, 'f3', 'cap-f') AS f3 \gset
SELECT is(cardinality(pg_temp.children_of(:r0)), 3, 'fan-out: the root has 3 children, max_children');
SELECT pg_temp.remember(:r0);
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'f4', 'cap-f')$$, :r0), '22023',
                 format('run %s has spawned 3 children, the most runq.settings.max_children allows; key ''f4'' would be one more', :r0),
                 'a fourth key past max_children 3: 22023 naming the cap');
SELECT is(pg_temp.state(:r0), pg_temp.remembered(:r0), 'the refused spawn changed nothing');
SELECT is(runq.spawn(:r0, 1, 'f2', 'cap-f'), :f2::bigint, 'a key the parent already used is still answered at the cap');
SELECT throws_ok('UPDATE runq.settings SET max_child_depth = 0', '23514', NULL,
                 'settings: max_child_depth is at least 1 (23514)');
SELECT throws_ok('UPDATE runq.settings SET max_children = 0', '23514', NULL,
                 'settings: max_children is at least 1 (23514)');
UPDATE runq.settings SET max_child_depth = :depth0, max_children = :fan0;

-- ---------------------------------------------------------------------------
-- Budgets roll up
-- ---------------------------------------------------------------------------
-- root (tokens 1000) > child (usd 10) > grandchild; tenant ch-b.
SELECT pg_temp.running(4120, 'b-root', p_budget => '{"tokens": 1000}', p_tenant => 'ch-b') AS br \gset
SELECT pg_temp.child(:br, 'c', 'b-child', '{"usd": 10}') AS bc \gset
SELECT pg_temp.child(:bc, 'g', 'b-grand') AS bg \gset
SELECT is(runq.record_usage(:bg, 1, '{"tokens": 10, "usd": 1}'), true, 'the grandchild records usage');
SELECT is(pg_temp.usage(:bg), '{"tokens": 10, "usd": 1}'::jsonb, 'the grandchild''s totals');
SELECT is(pg_temp.usage(:bc), '{"tokens": 10, "usd": 1}'::jsonb, 'the child''s totals include the grandchild''s usage');
SELECT is(pg_temp.usage(:br), '{"tokens": 10, "usd": 1}'::jsonb, 'and so do the root''s');
SELECT is(runq.record_usage(:bc, 1, '{"tokens": 5}'), true, 'the child records usage');
SELECT is(runq.record_usage(:br, 1, '{"tokens": 1}'), true, 'the root records usage');
SELECT results_eq(format('SELECT run_id, usage FROM runq.get_run(%s) UNION ALL SELECT run_id, usage FROM runq.get_run(%s)
                          UNION ALL SELECT run_id, usage FROM runq.get_run(%s)', :bg, :bc, :br),
                  format($$VALUES (%s::bigint, '{"tokens": 10, "usd": 1}'::jsonb), (%s, '{"tokens": 15, "usd": 1}'),
                                  (%s, '{"tokens": 16, "usd": 1}')$$, :bg, :bc, :br),
                  'get_run: each run''s totals are its own usage and its descendants''');
SELECT results_eq(format('SELECT key, usage FROM runq.children(%s)', :br), $$VALUES ('c'::text, '{"tokens": 15, "usd": 1}'::jsonb)$$,
                  'children: the child''s usage includes its descendants''');
SELECT results_eq(format('SELECT key, usage FROM runq.children(%s)', :bc), $$VALUES ('g'::text, '{"tokens": 10, "usd": 1}'::jsonb)$$,
                  'children of the child: the grandchild''s usage');
SELECT is(pg_temp.payloads(:bg, 'run.usage'), ARRAY['{"tokens": 10, "usd": 1}'::jsonb], 'the grandchild''s run.usage stays on it');
SELECT is(pg_temp.payloads(:bc, 'run.usage'), ARRAY['{"tokens": 5}'::jsonb], 'the child logs only its own run.usage');
SELECT is(pg_temp.payloads(:br, 'run.usage'), ARRAY['{"tokens": 1}'::jsonb], 'the root logs only its own run.usage');
SELECT is(runq.begin_turn(:bg, 1), true, 'the grandchild''s turn: no budget reached');

-- The grandchild's own budget.
SELECT pg_temp.child(:bc, 'g3', 'b-grand3', '{"tokens": 5}') AS bg3 \gset
SELECT is(runq.record_usage(:bg3, 1, '{"tokens": 5}'), true, 'a grandchild with a budget of 5 tokens spends 5');
SELECT is(runq.begin_turn(:bg3, 1), false, 'its own budget reached: begin_turn returns false');
SELECT is(pg_temp.failure(:bg3) - 'message' - 'at',
          format('{"code": "budget_exhausted", "run_id": %s, "key": "tokens", "limit": 5, "total": 5, "attempt": 1, "epoch": 1}', :bg3)::jsonb,
          'budget_exhausted naming the run itself, the key, the limit and the total');
SELECT ok(pg_temp.failure_complete(:bg3), 'a complete failure record');

-- The child's budget stops a grandchild.
SELECT pg_temp.child(:bc, 'g2', 'b-grand2') AS bg2 \gset
SELECT is(runq.record_usage(:bg2, 1, '{"usd": 9}'), true, 'another grandchild spends 9 usd: the child''s total is 10 of 10');
SELECT is(pg_temp.usage(:bc), '{"tokens": 20, "usd": 10}'::jsonb, 'the child''s totals');
SELECT is(runq.begin_turn(:bg2, 1), false, 'the grandchild''s begin_turn at its parent''s budget: false');
SELECT is(pg_temp.failure(:bg2) - 'message' - 'at',
          format('{"code": "budget_exhausted", "run_id": %s, "key": "usd", "limit": 10, "total": 10, "attempt": 1, "epoch": 1}', :bc)::jsonb,
          'budget_exhausted naming the ancestor whose budget it was, its key, limit and total');
SELECT is(pg_temp.status(:bg2), 'failed', 'the grandchild failed');
SELECT is(runq.begin_turn(:bg, 1), false, 'the first grandchild is stopped by the same budget');
SELECT is((pg_temp.failure(:bg) ->> 'run_id')::bigint, :bc::bigint, 'naming the child too');
SELECT results_eq(format('SELECT status, cancel_requested FROM runq.get_run(%s)', :bc), $$VALUES ('running'::text, false)$$,
                  'the child itself goes on until its own gate');

-- Usage recorded late on a finished grandchild still adds up.
SELECT is(runq.record_usage(:bg2, 1, '{"tokens": 4}'), false, 'late usage on the failed grandchild: false (fenced)');
SELECT results_eq(format('SELECT run_id, usage FROM runq.get_run(%s) UNION ALL SELECT run_id, usage FROM runq.get_run(%s)
                          UNION ALL SELECT run_id, usage FROM runq.get_run(%s)', :bg2, :bc, :br),
                  format($$VALUES (%s::bigint, '{"tokens": 4, "usd": 9}'::jsonb), (%s, '{"tokens": 24, "usd": 10}'),
                                  (%s, '{"tokens": 25, "usd": 10}')$$, :bg2, :bc, :br),
                  'and is added to the grandchild, the child and the root');
SELECT is(runq.begin_turn(:bc, 1), false, 'the child''s own turn at its budget: false');
SELECT is((pg_temp.failure(:bc) ->> 'run_id')::bigint, :bc::bigint, 'budget_exhausted naming the child itself');

-- usage_report counts each run.usage once: on the run that logged it.
SELECT results_eq($$SELECT kind, runs, usage FROM runq.usage_report(now()) WHERE tenant_id = 'ch-b' ORDER BY kind$$,
                  $$VALUES ('b-child'::text, 1::bigint, '{"tokens": 5}'::jsonb), ('b-grand', 1, '{"tokens": 10, "usd": 1}'),
                           ('b-grand2', 1, '{"tokens": 4, "usd": 9}'), ('b-grand3', 1, '{"tokens": 5}'),
                           ('b-root', 1, '{"tokens": 1}')$$,
                  'usage_report: each run''s own usage, not its descendants''');
SELECT is((SELECT sum((u.usage ->> 'tokens')::numeric) FROM runq.usage_report(now()) AS u WHERE u.tenant_id = 'ch-b'),
          (pg_temp.usage(:br) ->> 'tokens')::numeric, 'usage_report''s sum is the root''s total: nothing counted twice');

-- The root's budget stops a grandchild, and the root.
SELECT pg_temp.running(4121, 'b2-root', p_budget => '{"tokens": 20}', p_tenant => 'ch-b') AS cr \gset
SELECT pg_temp.child(:cr, 'c', 'b2-child') AS cc \gset
SELECT pg_temp.child(:cc, 'g', 'b2-grand') AS cg \gset
SELECT is(runq.record_usage(:cg, 1, '{"tokens": 19}'), true, 'a grandchild spends 19 of its root''s 20 tokens');
SELECT is(runq.begin_turn(:cg, 1), true, '19 of 20: the turn goes ahead');
SELECT is(runq.record_usage(:cg, 1, '{"tokens": 1}'), true, 'and 1 more');
SELECT is(runq.begin_turn(:cg, 1), false, '20 of 20 of the root''s budget: the grandchild''s begin_turn returns false');
SELECT is(pg_temp.failure(:cg) - 'message' - 'at',
          format('{"code": "budget_exhausted", "run_id": %s, "key": "tokens", "limit": 20, "total": 20, "attempt": 1, "epoch": 1}', :cr)::jsonb,
          'budget_exhausted naming the root, its key, limit and total');
SELECT is(runq.begin_turn(:cr, 1), false, 'the root''s own turn: its children''s usage reached its budget');
SELECT is((pg_temp.failure(:cr) ->> 'run_id')::bigint, :cr::bigint, 'budget_exhausted naming the root');
SELECT results_eq(format('SELECT status, cancel_requested FROM runq.get_run(%s)', :cc), $$VALUES ('running'::text, true)$$,
                  'the root failed: its running child is asked to cancel');
SELECT is(pg_temp.reason(:cc), 'run.cancel_requested parent_finished', 'with reason parent_finished');

-- The gate reads the ancestors' budgets as they are now.
SELECT pg_temp.running(4122, 'b3-root', p_tenant => 'ch-b') AS dr \gset
SELECT pg_temp.child(:dr, 'c', 'b3-child') AS dc \gset
SELECT is(runq.record_usage(:dc, 1, '{"tokens": 5}'), true, 'a child of a root without a budget spends 5 tokens');
SELECT is(runq.begin_turn(:dc, 1), true, 'no budget anywhere: the turn goes ahead');
SELECT is(runq.set_budget(:dr, '{"tokens": 5}'), true, 'an operator gives the root a budget of 5 tokens');
SELECT is(runq.begin_turn(:dc, 1), false, 'the child''s next turn meets it');
SELECT is((pg_temp.failure(:dc) ->> 'run_id')::bigint, :dr::bigint, 'budget_exhausted naming the root');

-- ---------------------------------------------------------------------------
-- Deadlines nest
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4130, 'n-root', p_timeout => interval '1 hour') AS nr \gset
SELECT deadline AS nr_deadline FROM runq.get_run(:nr) \gset
SELECT runq.spawn(:nr, 1, 'long', 'n-long', timeout => interval '2 hours') AS nl \gset
SELECT runq.spawn(:nr, 1, 'short', 'n-short', timeout => interval '10 minutes') AS ns \gset
SELECT pg_temp.child(:nr, 'none', 'n-none') AS nn \gset
SELECT is((SELECT deadline FROM runq.get_run(:nl)), :'nr_deadline'::timestamptz,
          'a child with a longer timeout: the parent''s deadline, the earlier');
SELECT is((SELECT deadline - created_at FROM runq.get_run(:ns)), interval '10 minutes',
          'a child with a shorter timeout: its own deadline');
SELECT ok((SELECT deadline < :'nr_deadline'::timestamptz FROM runq.get_run(:ns)), 'which is earlier than the parent''s');
SELECT is((SELECT deadline FROM runq.get_run(:nn)), :'nr_deadline'::timestamptz, 'a child without a timeout: the parent''s deadline');
SELECT runq.spawn(:nn, 1, 'g', 'n-grand') AS ng \gset
SELECT runq.spawn(:nn, 1, 'g5', 'n-grand5', timeout => interval '5 minutes') AS ng5 \gset
SELECT is((SELECT deadline FROM runq.get_run(:ng)), :'nr_deadline'::timestamptz, 'a grandchild: the root''s deadline, through its parent');
SELECT is((SELECT deadline - created_at FROM runq.get_run(:ng5)), interval '5 minutes', 'a grandchild with a shorter timeout: its own');
UPDATE runq.runs SET deadline = deadline + interval '1 day' WHERE run_id IN (:nr, :nn);
SELECT results_eq(format('SELECT deadline FROM runq.runs WHERE run_id IN (%s, %s, %s) ORDER BY run_id', :nl, :nn, :ng),
                  format($$VALUES (%L::timestamptz), (%L::timestamptz + interval '1 day'), (%L::timestamptz)$$,
                         :'nr_deadline', :'nr_deadline', :'nr_deadline'),
                  'a child''s deadline is fixed at spawn: moving its parent''s later moves nothing');
SELECT is((SELECT deadline FROM runq.claim(ARRAY[4130], 'w-ch', interval '1 hour', 1, ARRAY['n-long'])), :'nr_deadline'::timestamptz,
          'claim gives the child its deadline');
SELECT is((SELECT deadline FROM runq.get_run(:c1)), NULL::timestamptz, 'a child of a run without a deadline, without a timeout: none');

-- ---------------------------------------------------------------------------
-- The cascade: a parent's end ends its children
-- ---------------------------------------------------------------------------
SELECT pg_temp.family('cc', 4140);
SELECT is(pg_temp.family_state('cc'),
          ARRAY['d succeeded', 'p running', 'q queued', 'r running', 'rg queued', 'w waiting_for_user',
                'wc waiting_for_children', 'wcg queued', 'wg queued'],
          'fixture: a family, each member as described');
SELECT is(runq.complete(pg_temp.n('cc', 'p'), 1, '{"ok": 1}'), true, 'complete: the parent succeeds');
SELECT is(pg_temp.family_state('cc'),
          ARRAY['d succeeded', 'p succeeded', 'q cancelled', 'r running (cancel requested)', 'rg queued', 'w cancelled',
                'wc cancelled', 'wcg cancelled', 'wg cancelled'],
          'complete: queued and waiting children cancelled with their own children, the running child flagged, '
          'its queued child left to it, the finished child untouched');
SELECT is(pg_temp.family_reasons('cc'),
          ARRAY['q run.cancelled parent_finished', 'r run.cancel_requested parent_finished', 'rg -',
                'w run.cancelled parent_finished', 'wc run.cancelled parent_finished',
                'wcg run.cancelled parent_finished', 'wg run.cancelled parent_finished'],
          'complete: every reason is parent_finished');
SELECT is(pg_temp.events(pg_temp.n('cc', 'd')), ARRAY['run.created@0', 'run.claimed@1', 'run.succeeded@1'],
          'complete: the finished child logged nothing more');
SELECT is(pg_temp.last_event(pg_temp.n('cc', 'wc')), 'run.cancelled@1', 'complete: the waiting_for_children child ends cancelled');
SELECT is(runq.heartbeat(pg_temp.n('cc', 'r'), 1), false, 'complete: the running child''s next heartbeat returns false');
SELECT is(pg_temp.family_state('cc'),
          ARRAY['d succeeded', 'p succeeded', 'q cancelled', 'r cancelled', 'rg cancelled', 'w cancelled',
                'wc cancelled', 'wcg cancelled', 'wg cancelled'],
          'complete: the running child is cancelled, and its queued child with it');
SELECT is(pg_temp.reason(pg_temp.n('cc', 'rg')), 'run.cancelled parent_finished', 'complete: the last one for parent_finished too');

SELECT pg_temp.family('cf', 4141);
SELECT is(runq.fail(pg_temp.n('cf', 'p'), 1, '{"code": "tool_error"}'), true, 'fail: the parent fails');
SELECT is(pg_temp.family_state('cf'),
          ARRAY['d succeeded', 'p failed', 'q cancelled', 'r running (cancel requested)', 'rg queued', 'w cancelled',
                'wc cancelled', 'wcg cancelled', 'wg cancelled'],
          'fail: the same cascade');
SELECT is(pg_temp.family_reasons('cf'),
          ARRAY['q run.cancelled parent_finished', 'r run.cancel_requested parent_finished', 'rg -',
                'w run.cancelled parent_finished', 'wc run.cancelled parent_finished',
                'wcg run.cancelled parent_finished', 'wg run.cancelled parent_finished'],
          'fail: every reason is parent_finished');
SELECT is(runq.checkpoint(pg_temp.n('cf', 'r'), 1, '{"s": 1}'), false, 'fail: the running child''s next checkpoint returns false');
SELECT is(pg_temp.family_state('cf') @> ARRAY['r cancelled', 'rg cancelled'], true, 'fail: it is cancelled, and its child');

SELECT pg_temp.family('cn', 4142);
SELECT is(runq.cancel(pg_temp.n('cn', 'p'), 'stop'), 'cancel_requested', 'cancel: of the running parent, requested');
SELECT is(pg_temp.family_state('cn'),
          ARRAY['d succeeded', 'p running (cancel requested)', 'q queued', 'r running', 'rg queued', 'w waiting_for_user',
                'wc waiting_for_children', 'wcg queued', 'wg queued'],
          'cancel: a flag is no end: the children go on');
SELECT is(runq.heartbeat(pg_temp.n('cn', 'p'), 1), false, 'cancel: the parent''s heartbeat meets the flag');
SELECT is(pg_temp.family_state('cn'),
          ARRAY['d succeeded', 'p cancelled', 'q cancelled', 'r running (cancel requested)', 'rg queued', 'w cancelled',
                'wc cancelled', 'wcg cancelled', 'wg cancelled'],
          'cancel: the parent cancelled, the cascade follows');
SELECT is(pg_temp.family_reasons('cn'),
          ARRAY['q run.cancelled parent_finished', 'r run.cancel_requested parent_finished', 'rg -',
                'w run.cancelled parent_finished', 'wc run.cancelled parent_finished',
                'wcg run.cancelled parent_finished', 'wg run.cancelled parent_finished'],
          'cancel: every reason is parent_finished');
SELECT is(runq.begin_turn(pg_temp.n('cn', 'r'), 1), false, 'cancel: the running child''s begin_turn returns false');
SELECT is(pg_temp.family_state('cn') @> ARRAY['r cancelled', 'rg cancelled'], true, 'cancel: it is cancelled, and its child');

SELECT pg_temp.family('cd', 4143);
UPDATE runq.runs SET attempts = max_attempts, lease_expires_at = now() - interval '1 second'
 WHERE run_id = pg_temp.n('cd', 'p');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('cd', 'p') || ':dead_lettered'],
          'sweep: the parent''s lease expired with its attempts used up: dead_lettered');
SELECT is(pg_temp.failure(pg_temp.n('cd', 'p')) ->> 'code', 'max_attempts_exceeded', 'sweep: the parent failed, max_attempts_exceeded');
SELECT is(pg_temp.family_state('cd'),
          ARRAY['d succeeded', 'p failed', 'q cancelled', 'r running (cancel requested)', 'rg queued', 'w cancelled',
                'wc cancelled', 'wcg cancelled', 'wg cancelled'],
          'sweep, dead letter: the same cascade');
SELECT is(pg_temp.family_reasons('cd'),
          ARRAY['q run.cancelled parent_finished', 'r run.cancel_requested parent_finished', 'rg -',
                'w run.cancelled parent_finished', 'wc run.cancelled parent_finished',
                'wcg run.cancelled parent_finished', 'wg run.cancelled parent_finished'],
          'sweep, dead letter: every reason is parent_finished');
SELECT is(runq.release(pg_temp.n('cd', 'r'), 1), true, 'sweep, dead letter: the running child releases its lease');
SELECT is(pg_temp.family_state('cd') @> ARRAY['r cancelled', 'rg cancelled'], true,
          'sweep, dead letter: the release cancels it, and its child');

SELECT pg_temp.family('ct', 4144, interval '1 hour');
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = pg_temp.n('ct', 'p');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('ct', 'p') || ':deadline_exceeded'], 'sweep: the parent''s deadline passed');
SELECT is(pg_temp.failure(pg_temp.n('ct', 'p')) ->> 'code', 'deadline_exceeded', 'sweep: the parent failed, deadline_exceeded');
SELECT is(pg_temp.family_state('ct'),
          ARRAY['d succeeded', 'p failed', 'q cancelled', 'r running (cancel requested)', 'rg queued', 'w cancelled',
                'wc cancelled', 'wcg cancelled', 'wg cancelled'],
          'sweep, deadline: the same cascade');
SELECT is(pg_temp.family_reasons('ct'),
          ARRAY['q run.cancelled parent_finished', 'r run.cancel_requested parent_finished', 'rg -',
                'w run.cancelled parent_finished', 'wc run.cancelled parent_finished',
                'wcg run.cancelled parent_finished', 'wg run.cancelled parent_finished'],
          'sweep, deadline: every reason is parent_finished');
UPDATE runq.runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = pg_temp.n('ct', 'r');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('ct', 'r') || ':cancelled'],
          'sweep, deadline: the running child''s lease expires: the sweep cancels it');
SELECT is(pg_temp.family_state('ct') @> ARRAY['r cancelled', 'rg cancelled'], true,
          'sweep, deadline: and its child with it');

-- A child's end does not touch a running parent.
SELECT pg_temp.running(4145, 'solo-p') AS sp \gset
SELECT pg_temp.child(:sp, 'c', 'solo-c') AS sc \gset
SELECT is(runq.complete(:sc, 1), true, 'a child succeeds while its parent runs');
SELECT is(pg_temp.events(:sp), ARRAY['run.created@0', 'run.claimed@1', 'run.spawned@1'],
          'the running parent is untouched: no run.children_done');
SELECT is(pg_temp.status(:sp), 'running', 'and still running');

-- ---------------------------------------------------------------------------
-- wait_children
-- ---------------------------------------------------------------------------
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'ch-lim', 1)$$, 'fixture: tenant ch-lim may run one run at a time');
SELECT pg_temp.running(4150, 'wl-p', p_session => 'ch-ws', p_tenant => 'ch-lim') AS wp \gset
SELECT pg_temp.run(4150, 'wl-x', p_tenant => 'ch-lim') AS wx \gset
SELECT is_empty($$SELECT * FROM runq.claim(ARRAY[4150], 'w-ch', interval '1 hour', 1, ARRAY['wl-x'])$$,
                'the parent holds the tenant''s one slot: another run of the tenant is not claimed');
SELECT is((SELECT parked FROM runq.runs WHERE run_id = :wx), true, 'fixture: it is parked behind the tenant''s limit');
SELECT runq.spawn(:wp, 1, 'a', 'wl-a') AS wa \gset
SELECT runq.spawn(:wp, 1, 'b', 'wl-b') AS wb \gset
SELECT is(runq.wait_children(:wp, 1), true, 'wait_children: true');
SELECT results_eq(format('SELECT status, attempts, lease_epoch, cancel_requested, question FROM runq.get_run(%s)', :wp),
                  $$VALUES ('waiting_for_children'::text, 1, 1::bigint, false, NULL::jsonb)$$,
                  'the parent is waiting_for_children, epoch and attempts kept');
SELECT is((SELECT lease_expires_at FROM runq.runs WHERE run_id = :wp), NULL::timestamptz, 'its lease has ended');
SELECT is(pg_temp.last_event(:wp), 'run.waiting_for_children@1', 'run.waiting_for_children under epoch 1');
SELECT is(pg_temp.payloads(:wp, 'run.waiting_for_children'), ARRAY['{"children": 2}'::jsonb],
          'its payload: the number of live children');
SELECT is((SELECT running FROM runq.limits WHERE scope = 'tenant' AND key = 'ch-lim'), 0::bigint,
          'the waiting parent holds no slot: the tenant runs nothing');
-- The slot is handed on by wait_children itself (runq._slot_left), not left
-- to a claim that comes back short or to the next sweep.
SELECT is((SELECT parked FROM runq.runs WHERE run_id = :wx), false,
          'the run parked behind the parent''s slot is admitted in wait_children''s transaction');
SELECT is(pg_temp.take(:wx), 1::bigint, 'another run of the tenant is claimed while the parent waits');
SELECT is_empty($$SELECT * FROM runq.claim(ARRAY[4150], 'w-ch', interval '1 hour', 1, ARRAY['wl-a'])$$,
                'a child counts against its tenant''s limit like any run');
SELECT is(runq.complete(:wx, 1), true, 'the other run succeeds');
SELECT is(pg_temp.status(:wp), 'waiting_for_children', 'the parent still waits');
SELECT is(pg_temp.take(:wa), 1::bigint, 'the first child is claimed');

SELECT results_eq($$SELECT ready, running, waiting_for_user, waiting_for_children FROM runq.queue_stats WHERE priority = 4150$$,
                  $$VALUES (1::bigint, 1::bigint, 0::bigint, 1::bigint)$$,
                  'queue_stats: the waiting parent in waiting_for_children, not in waiting_for_user');
SELECT results_eq($$SELECT run_id FROM runq.list_runs(status => 'waiting_for_children', tenant_id => 'ch-lim')$$,
                  format('VALUES (%s::bigint)', :wp), 'list_runs by status waiting_for_children and tenant');
SELECT results_eq($$SELECT run_id FROM runq.list_runs(status => 'waiting_for_children', kind => 'wl-p')$$,
                  format('VALUES (%s::bigint)', :wp), 'list_runs by status waiting_for_children and kind');
SELECT ok(:wp IN (SELECT run_id FROM runq.list_runs(status => 'waiting_for_children', max_runs => 1000)),
          'list_runs by status waiting_for_children alone');
SELECT ok(:wp IN (SELECT run_id FROM runq.list_runs(tenant_id => 'ch-lim')), 'list_runs of the tenant, any status');
SELECT ok(:wp IN (SELECT run_id FROM runq.list_runs(max_runs => 1000)), 'list_runs without a filter');
SELECT results_eq($$SELECT run_id, status FROM runq.list_runs(kind => 'wl-p')$$,
                  format($$VALUES (%s::bigint, 'waiting_for_children'::text)$$, :wp), 'list_runs of the kind, any status');
SELECT is_empty($$SELECT * FROM runq.list_runs(status => 'waiting_for_user', tenant_id => 'ch-lim')$$,
                'list_runs by waiting_for_user does not show it');

SELECT is(runq.wait_children(:wp, 1), false, 'wait_children again by epoch 1: fenced, false');
SELECT is(runq.heartbeat(:wp, 1), false, 'a heartbeat of the waiting run: false');
SELECT is(runq.spawn(:wp, 1, 'c', 'wl-c'), NULL::bigint, 'a spawn by the waiting run: NULL');
SELECT is(pg_temp.fenced(:wp), ARRAY['wait_children@1'], 'one run.fenced for epoch 1, operation wait_children');
SELECT is(pg_temp.children_of(:wp), ARRAY[:wa, :wb]::bigint[], 'nothing created');
SELECT throws_ok($$SELECT runq.wait_children(-4150, 1)$$, 'RQ003', 'run -4150 not found', 'wait_children: no such run is RQ003');
SELECT throws_ok($$SELECT runq.wait_children(NULL, 1)$$, '22023', 'run_id must be given, got NULL',
                 'wait_children: run_id NULL is 22023');
SELECT throws_ok(format('SELECT runq.wait_children(%s, NULL)', :wp), '22023', 'epoch must be given, got NULL',
                 'wait_children: epoch NULL is 22023');
SELECT throws_ok($$SELECT runq.wait_children(-4150, NULL)$$, '22023', 'epoch must be given, got NULL',
                 'wait_children: epoch NULL for no such run is 22023: arguments first');
SELECT throws_ok($$SELECT * FROM runq.submit(tenant_id => 'ch-lim', kind => 'wl-s', session_id => 'ch-ws', priority => 4150)$$,
                 'RQ002', format('session ch-ws of tenant ch-lim already has active run %s', :wp),
                 'a submit to the waiting run''s session: RQ002 naming it');
SELECT throws_ok(format($$SELECT runq.deliver_input(%s, '{"a": 1}')$$, :wp), 'RQ004',
                 format('run %s is waiting_for_children, not waiting_for_user', :wp),
                 'input to a run waiting for its children: RQ004');
SELECT is(pg_temp.swept(), '{}'::text[], 'the sweep leaves the waiting run alone (no lease to expire)');
SELECT results_eq(format('SELECT status, attempts, lease_epoch FROM runq.get_run(%s)', :wp),
                  $$VALUES ('waiting_for_children'::text, 1, 1::bigint)$$, 'the parent still waits, unchanged');
SELECT is((SELECT count(*)::int FROM runq.runs WHERE tenant_id = 'ch-lim' AND session_id = 'ch-ws'), 1,
          'the refused submit created nothing');

SELECT is(runq.complete(:wa, 1, '{"a": 1}'), true, 'the first child succeeds');
SELECT is(pg_temp.status(:wp), 'waiting_for_children', 'one child left: the parent waits on');
SELECT is(pg_temp.take(:wb), 1::bigint, 'the second child is claimed (the slot is free again)');
SELECT is(runq.fail(:wb, 1, '{"code": "boom"}'), true, 'the last child fails');
SELECT results_eq(format('SELECT status, attempts, scheduled_for FROM runq.get_run(%s)', :wp),
                  $$VALUES ('queued'::text, 0, NULL::timestamptz)$$,
                  'the last child''s end requeued the parent, claimable at once, its attempts reset');
SELECT is(pg_temp.last_event(:wp), 'run.children_done@1', 'run.children_done logged');
SELECT is(pg_temp.payloads(:wp, 'run.children_done'), ARRAY['{}'::jsonb], 'its payload is {}');
SELECT results_eq($$SELECT run_id, epoch, attempt, resumed FROM runq.claim(ARRAY[4150], 'w-ch', interval '1 hour', 1, ARRAY['wl-p'])$$,
                  format('VALUES (%s::bigint, 2::bigint, 1, true)', :wp),
                  'the parent is claimed again: epoch 2, attempt 1, a resumed claim');
SELECT results_eq(format('SELECT key, run_id, kind, status, result, failure ->> ''code'', usage FROM runq.children(%s)', :wp),
                  format($$VALUES ('a'::text, %s::bigint, 'wl-a'::text, 'succeeded'::text, '{"a": 1}'::jsonb, NULL::text, '{}'::jsonb),
                                  ('b', %s, 'wl-b', 'failed', NULL, 'boom', '{}')$$, :wa, :wb),
                  'children: the results and failures of its children');
SELECT is(runq.complete(:wp, 2, '{"sum": 1}'), true, 'the parent completes under epoch 2');
SELECT lives_ok($$SELECT runq.set_limit('tenant', 'ch-lim', NULL)$$, 'fixture: tenant ch-lim is no longer limited');

-- An empty wait: queued at once, attempts kept, so that max_attempts holds.
SELECT pg_temp.running(4151, 'we-e', p_max_attempts => 2) AS we \gset
SELECT is(runq.wait_children(:we, 1), true, 'an empty wait: true');
SELECT results_eq(format('SELECT status, attempts, scheduled_for FROM runq.get_run(%s)', :we),
                  $$VALUES ('queued'::text, 1, NULL::timestamptz)$$, 'queued at once, its attempts kept');
SELECT is(pg_temp.last_event(:we), 'run.children_done@1', 'run.children_done logged');
SELECT results_eq($$SELECT epoch, attempt, resumed FROM runq.claim(ARRAY[4151], 'w-ch', interval '1 hour', 1, ARRAY['we-e'])$$,
                  'VALUES (2::bigint, 2, true)', 'claimed again: attempt 2 of 2');
UPDATE runq.runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = :we;
SELECT is(pg_temp.swept(), ARRAY[:we || ':dead_lettered'], 'its lease expires: dead_lettered, max_attempts met');

-- Every child already terminal: queued at once, attempts kept.
SELECT pg_temp.running(4152, 'wt-f') AS wf \gset
SELECT pg_temp.child(:wf, 'c', 'wt-c') AS wf1 \gset
SELECT is(runq.complete(:wf1, 1), true, 'the only child succeeds');
SELECT is(runq.wait_children(:wf, 1), true, 'wait_children with every child terminal: true');
SELECT results_eq(format('SELECT status, attempts FROM runq.get_run(%s)', :wf), $$VALUES ('queued'::text, 1)$$,
                  'queued at once, its attempts kept');
SELECT is(pg_temp.last_event(:wf), 'run.children_done@1', 'run.children_done logged');
SELECT is(pg_temp.take(:wf), 2::bigint, 'fixture: claimed again');
SELECT runq.spawn(:wf, 2, 'c2', 'wt-c2') AS wf2 \gset
SELECT is(runq.wait_children(:wf, 2), true, 'wait_children with one child terminal and one live: true');
SELECT is(pg_temp.payloads(:wf, 'run.waiting_for_children'), ARRAY['{"children": 1}'::jsonb],
          'run.waiting_for_children counts the live child only');
SELECT is(pg_temp.status(:wf), 'waiting_for_children', 'and the run waits for it');

-- A class whose only run waits for its children has its row in queue_stats.
SELECT pg_temp.running(4177, 'qs-p') AS qs \gset
SELECT isnt(runq.spawn(:qs, 1, 'c', 'qs-c', priority => 4178), NULL::bigint, 'fixture: a child in another class');
SELECT is(runq.wait_children(:qs, 1), true, 'fixture: the parent waits for it');
SELECT results_eq($$SELECT ready, scheduled, running, waiting_for_user, failed, oldest_ready_age, waiting_for_children
                      FROM runq.queue_stats WHERE priority = 4177$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, NULL::interval, 1::bigint)$$,
                  'queue_stats: a row for a class whose only run waits for its children');

-- cancel of a waiting_for_children run.
SELECT pg_temp.running(4153, 'wc-g') AS wg \gset
SELECT runq.spawn(:wg, 1, 'q', 'wc-q') AS wg1 \gset
SELECT pg_temp.child(:wg, 'r', 'wc-r') AS wg2 \gset
SELECT is(runq.wait_children(:wg, 1), true, 'fixture: the parent waits for its children');
SELECT is(runq.cancel(:wg, 'stop'), 'cancelled', 'cancel of a waiting_for_children run: cancelled at once');
SELECT is(pg_temp.payloads(:wg, 'run.cancelled'), ARRAY['{"reason": "stop", "previous_status": "waiting_for_children"}'::jsonb],
          'run.cancelled with the reason given and the previous status');
SELECT is(pg_temp.reason(:wg1), 'run.cancelled parent_finished', 'its queued child is cancelled');
SELECT is(pg_temp.reason(:wg2), 'run.cancel_requested parent_finished', 'its running child is asked to cancel');
SELECT is(runq.heartbeat(:wg2, 1), false, 'the running child''s heartbeat: false');
SELECT is(pg_temp.status(:wg2), 'cancelled', 'it is cancelled');
SELECT results_eq(format('SELECT status, finished_at IS NOT NULL FROM runq.get_run(%s)', :wg), $$VALUES ('cancelled'::text, true)$$,
                  'its last child''s end does not requeue the cancelled parent');
SELECT is(pg_temp.last_event(:wg), 'run.cancelled@1', 'no run.children_done');

-- The deadline of a waiting_for_children run.
SELECT pg_temp.running(4154, 'wd-h', p_timeout => interval '1 hour') AS wd \gset
SELECT runq.spawn(:wd, 1, 'q', 'wd-q') AS wd1 \gset
SELECT is(runq.wait_children(:wd, 1), true, 'fixture: the parent waits for its child');
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = :wd;
SELECT is(pg_temp.swept(), ARRAY[:wd || ':deadline_exceeded'], 'the sweep fails the waiting run past its deadline');
SELECT results_eq(format($$SELECT status, failure ->> 'code' FROM runq.get_run(%s)$$, :wd),
                  $$VALUES ('failed'::text, 'deadline_exceeded'::text)$$, 'failed, deadline_exceeded');
SELECT ok(pg_temp.failure_complete(:wd), 'a complete failure record');
SELECT is(pg_temp.reason(:wd1), 'run.cancelled parent_finished', 'its child is cancelled');

-- wait_children honours a cancel flag and the deadline, and is fenced.
SELECT pg_temp.running(4155, 'wf-i') AS wi \gset
SELECT runq.spawn(:wi, 1, 'q', 'wf-q') AS wi1 \gset
SELECT is(runq.cancel(:wi), 'cancel_requested', 'cancel flag: requested');
SELECT is(runq.wait_children(:wi, 1), false, 'cancel flag: wait_children returns false');
SELECT is(pg_temp.payloads(:wi, 'run.cancelled'), ARRAY['{"reason": "cancel_requested", "observed_by": "wait_children"}'::jsonb],
          'cancel flag: the run is cancelled, observed by wait_children');
SELECT is(pg_temp.reason(:wi1), 'run.cancelled parent_finished', 'cancel flag: and its child');
SELECT is(cardinality(pg_temp.payloads(:wi, 'run.waiting_for_children')), 0, 'cancel flag: it never waited');

SELECT pg_temp.running(4156, 'wf-j', p_timeout => interval '1 hour') AS wj \gset
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = :wj;
SELECT is(runq.wait_children(:wj, 1), false, 'deadline passed: wait_children returns false');
SELECT is(pg_temp.failure(:wj) ->> 'code', 'deadline_exceeded', 'deadline passed: failed, deadline_exceeded');

SELECT pg_temp.running(4157, 'wf-k') AS wk \gset
SELECT is(runq.release(:wk, 1), true, 'fixture: the run is released');
SELECT is(pg_temp.take(:wk), 2::bigint, 'fixture: and claimed again, under epoch 2');
SELECT is(runq.wait_children(:wk, 1), false, 'the stale epoch 1: wait_children returns false');
SELECT is(pg_temp.fenced(:wk), ARRAY['wait_children@1'], 'one run.fenced, operation wait_children');
SELECT results_eq(format('SELECT status, lease_epoch FROM runq.get_run(%s)', :wk), $$VALUES ('running'::text, 2::bigint)$$,
                  'the run goes on under epoch 2');

-- ---------------------------------------------------------------------------
-- Every way a child ends: its own children follow, its waiting parent wakes
-- ---------------------------------------------------------------------------
-- A chain per way: g waits for its one child x, and x has a queued child y.
-- Each way of ending x must cancel y (parent_finished) and requeue g
-- (run.children_done, attempts reset), in the transaction that ends x.
SELECT pg_temp.chain('e-complete', 4160);
SELECT is(pg_temp.chain_state('e-complete'), ARRAY['x running', 'y queued', 'g waiting_for_children'],
          'fixture: a chain, g waiting for x, which has a queued child y');
SELECT is(runq.complete(pg_temp.n('e-complete', 'x'), 1), true, 'complete ends x');
SELECT is(pg_temp.chain_state('e-complete'),
          ARRAY['x succeeded', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'complete: y cancelled, g requeued');

SELECT pg_temp.chain('e-fail', 4161);
SELECT is(runq.fail(pg_temp.n('e-fail', 'x'), 1, '{"code": "e"}'), true, 'fail ends x');
SELECT is(pg_temp.chain_state('e-fail'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'fail: y cancelled, g requeued');

SELECT pg_temp.chain('e-many', 4162);
SELECT results_eq(format('SELECT run_id, completed FROM runq.complete_many(ARRAY[%s]::bigint[], ARRAY[1]::bigint[])',
                         pg_temp.n('e-many', 'x')),
                  format('VALUES (%s::bigint, true)', pg_temp.n('e-many', 'x')), 'complete_many ends x');
SELECT is(pg_temp.chain_state('e-many'),
          ARRAY['x succeeded', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'complete_many: y cancelled, g requeued');

SELECT pg_temp.chain('e-cac', 4163);
SELECT results_eq(format('SELECT completed, run_id FROM runq.complete_and_claim(%s, 1, NULL, ARRAY[4199])', pg_temp.n('e-cac', 'x')),
                  'VALUES (true, NULL::bigint)', 'complete_and_claim ends x (and claims nothing)');
SELECT is(pg_temp.chain_state('e-cac'),
          ARRAY['x succeeded', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'complete_and_claim: y cancelled, g requeued');

SELECT pg_temp.chain('e-cancel-q', 4164, 'queued');
SELECT is(runq.cancel(pg_temp.n('e-cancel-q', 'x')), 'cancelled', 'cancel ends x, queued again after a release');
SELECT is(pg_temp.chain_state('e-cancel-q'),
          ARRAY['x cancelled', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'cancel of a queued child: y cancelled, g requeued');

SELECT pg_temp.chain('e-flag', 4165);
SELECT is(runq.cancel(pg_temp.n('e-flag', 'x')), 'cancel_requested', 'cancel flags the running x');
SELECT is(runq.heartbeat(pg_temp.n('e-flag', 'x'), 1), false, 'x''s heartbeat meets the flag');
SELECT is(pg_temp.chain_state('e-flag'),
          ARRAY['x cancelled', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'a cancel flag met: y cancelled, g requeued');

SELECT pg_temp.chain('e-budget', 4166, p_budget => '{"tokens": 0}');
SELECT is(runq.begin_turn(pg_temp.n('e-budget', 'x'), 1), false, 'x''s begin_turn at its budget of 0');
SELECT is(pg_temp.chain_state('e-budget'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'budget_exhausted: y cancelled, g requeued');

SELECT pg_temp.chain('e-deadline', 4167, p_timeout => interval '1 hour');
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = pg_temp.n('e-deadline', 'x');
SELECT is(runq.checkpoint(pg_temp.n('e-deadline', 'x'), 1, '{"s": 1}'), false, 'x''s checkpoint past its deadline');
SELECT is(pg_temp.chain_state('e-deadline'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'deadline_exceeded by the holder''s call: y cancelled, g requeued');

SELECT pg_temp.chain('e-dead', 4168, p_max_attempts => 1);
UPDATE runq.runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = pg_temp.n('e-dead', 'x');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('e-dead', 'x') || ':dead_lettered'], 'the sweep dead-letters x');
SELECT is(pg_temp.chain_state('e-dead'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'the sweep''s dead letter: y cancelled, g requeued');

SELECT pg_temp.chain('e-orphan', 4169, p_policy => 'fail');
SELECT is(runq.release(pg_temp.n('e-orphan', 'x'), 1), true, 'x, of policy fail, releases its lease');
SELECT is(pg_temp.failure(pg_temp.n('e-orphan', 'x')) ->> 'code', 'orphaned', 'x failed, orphaned');
SELECT is(pg_temp.chain_state('e-orphan'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'release, orphaned: y cancelled, g requeued');

SELECT pg_temp.chain('e-sweep-q', 4171, 'queued', p_timeout => interval '1 hour');
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = pg_temp.n('e-sweep-q', 'x');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('e-sweep-q', 'x') || ':deadline_exceeded'], 'the sweep fails the queued x past its deadline');
SELECT is(pg_temp.chain_state('e-sweep-q'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'the sweep''s deadline, queued: y cancelled, g requeued');

SELECT pg_temp.chain('e-sweep-w', 4172, 'waiting_for_user', p_timeout => interval '1 hour');
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = pg_temp.n('e-sweep-w', 'x');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('e-sweep-w', 'x') || ':deadline_exceeded'],
          'the sweep fails x, waiting for its user, past its deadline');
SELECT is(pg_temp.chain_state('e-sweep-w'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'the sweep''s deadline, waiting_for_user: y cancelled, g requeued');

SELECT pg_temp.chain('e-cancel-w', 4173, 'waiting_for_user');
SELECT is(runq.cancel(pg_temp.n('e-cancel-w', 'x')), 'cancelled', 'cancel ends x, waiting for its user');
SELECT is(pg_temp.chain_state('e-cancel-w'),
          ARRAY['x cancelled', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'cancel of a waiting_for_user child: y cancelled, g requeued');

SELECT pg_temp.chain('e-sweep-c', 4174);
SELECT is(runq.cancel(pg_temp.n('e-sweep-c', 'x')), 'cancel_requested', 'cancel flags the running x');
UPDATE runq.runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = pg_temp.n('e-sweep-c', 'x');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('e-sweep-c', 'x') || ':cancelled'], 'its lease expires: the sweep cancels it');
SELECT is(pg_temp.chain_state('e-sweep-c'),
          ARRAY['x cancelled', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'the sweep''s cancel: y cancelled, g requeued');

SELECT pg_temp.chain('e-sweep-wc', 4175, 'waiting_for_children', p_timeout => interval '1 hour');
UPDATE runq.runs SET deadline = now() - interval '1 second' WHERE run_id = pg_temp.n('e-sweep-wc', 'x');
SELECT is(pg_temp.swept(), ARRAY[pg_temp.n('e-sweep-wc', 'x') || ':deadline_exceeded'],
          'the sweep fails x, waiting for its own child, past its deadline');
SELECT is(pg_temp.chain_state('e-sweep-wc'),
          ARRAY['x failed', 'y cancelled run.cancelled parent_finished', 'g queued run.children_done@1 attempts 0'],
          'the sweep''s deadline, waiting_for_children: y cancelled, g requeued');

-- queue_ttl: only a submitted run has one; a root that spawned, released and
-- expired in the queue ends its child too.
SELECT s.run_id AS tx FROM runq.submit(tenant_id => 'ch', kind => 'ttl-x', priority => 4176, queue_ttl => interval '1 hour') AS s \gset
SELECT is(pg_temp.take(:tx), 1::bigint, 'fixture: a run with a queue_ttl is claimed');
SELECT runq.spawn(:tx, 1, 'y', 'ttl-y') AS ty \gset
SELECT is(runq.release(:tx, 1), true, 'fixture: it spawns and releases its lease, queued again');
UPDATE runq.runs SET expires_at = now() - interval '1 second' WHERE run_id = :tx;
SELECT is(pg_temp.swept(), ARRAY[:tx || ':expired'], 'the sweep expires it (queue_ttl)');
SELECT is(pg_temp.reason(:ty), 'run.cancelled parent_finished', 'queue_ttl_expired: its child is cancelled');

-- ---------------------------------------------------------------------------
-- children
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4170, 'cm-m') AS cm \gset
SELECT runq.spawn(:cm, 1, 'zeta', 'cm-z') AS cmz \gset
SELECT runq.spawn(:cm, 1, 'alpha', 'cm-a') AS cma \gset
SELECT runq.spawn(:cm, 1, 'mid', 'cm-i') AS cmi \gset
SELECT results_eq(format('SELECT key, run_id, kind, status FROM runq.children(%s)', :cm),
                  format($$VALUES ('zeta'::text, %s::bigint, 'cm-z'::text, 'queued'::text), ('alpha', %s, 'cm-a', 'queued'),
                                  ('mid', %s, 'cm-i', 'queued')$$, :cmz, :cma, :cmi),
                  'children: in spawn order, not by key');
SELECT is(pg_temp.take(:cmz), 1::bigint, 'fixture: the first child is claimed');
SELECT runq.spawn(:cmz, 1, 'sub', 'cm-s') AS cms \gset
SELECT is(runq.record_usage(:cmz, 1, '{"tokens": 3}'), true, 'fixture: it records usage');
SELECT is(runq.complete(:cmz, 1, '{"r": 1}'), true, 'fixture: and succeeds');
SELECT is(pg_temp.take(:cma), 1::bigint, 'fixture: the second child is claimed');
SELECT is(runq.fail(:cma, 1, '{"code": "nope", "detail": 2}'), true, 'fixture: and fails');
SELECT results_eq(format('SELECT * FROM runq.children(%s)', :cm),
                  format($$SELECT 'zeta'::text, %s::bigint, 'cm-z'::text, 'succeeded'::text, '{"r": 1}'::jsonb, NULL::jsonb,
                                  '{"tokens": 3}'::jsonb
                           UNION ALL SELECT 'alpha', %s, 'cm-a', 'failed', NULL, (SELECT failure FROM runq.get_run(%s)), '{}'
                           UNION ALL SELECT 'mid', %s, 'cm-i', 'queued', NULL, NULL, '{}'$$, :cmz, :cma, :cma, :cmi),
                  'children: every column: key, run_id, kind, status, result, failure, usage');
SELECT is((SELECT failure ->> 'detail' FROM runq.children(:cm) WHERE key = 'alpha'), '2', 'the failure as the child stored it');
SELECT results_eq(format('SELECT key, run_id FROM runq.children(%s)', :cmz), format($$VALUES ('sub'::text, %s::bigint)$$, :cms),
                  'children of a child: its own, not its parent''s');
SELECT is((SELECT count(*)::int FROM runq.children(:cm)), 3, 'children: the direct children only, not the grandchild');
SELECT is_empty(format('SELECT * FROM runq.children(%s)', :cmi), 'children of a run without any: no rows, no error');
SELECT throws_ok('SELECT * FROM runq.children(-4170)', 'RQ003', 'run -4170 not found', 'children: no such run is RQ003 naming it');
SELECT throws_ok('SELECT * FROM runq.children(NULL)', '22023', 'run_id must be given, got NULL',
                 'children: run_id NULL is 22023, as in every lookup');

-- ---------------------------------------------------------------------------
-- parent_run_id in get_run, list_runs and dead_letter
-- ---------------------------------------------------------------------------
SELECT is((SELECT parent_run_id FROM runq.get_run(:cma)), :cm::bigint, 'get_run: parent_run_id');
SELECT is((SELECT (runq.get_run(:cmz)).parent_run_id), :cm::bigint, 'get_run: parent_run_id as an attribute of the row');
SELECT results_eq(format($$SELECT run_id, parent_run_id FROM runq.list_runs(tenant_id => 'ch', kind => 'cm-i')$$),
                  format('VALUES (%s::bigint, %s::bigint)', :cmi, :cm), 'list_runs: parent_run_id');
SELECT results_eq(format($$SELECT run_id, parent_run_id FROM runq.list_runs(kind => 'cm-m')$$),
                  format('VALUES (%s::bigint, NULL::bigint)', :cm), 'list_runs: NULL for a root run');
SELECT results_eq(format('SELECT parent_run_id FROM runq.dead_letter(1000) WHERE run_id = %s', :cma),
                  format('VALUES (%s::bigint)', :cm), 'dead_letter: parent_run_id');
SELECT results_eq(format('SELECT * FROM runq.list_runs(kind => ''cm-a'')'),
                  format('SELECT * FROM runq.get_run(%s)', :cma), 'list_runs: the same row as get_run, every column');

-- ---------------------------------------------------------------------------
-- redrive of a child
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4180, 'rd-p') AS rp \gset
SELECT pg_temp.child(:rp, 'c', 'rd-c') AS rc \gset
SELECT is(runq.fail(:rc, 1, '{"code": "x"}'), true, 'fixture: the child fails');
SELECT is(runq.redrive(:rc), true, 'redrive of a failed child whose parent runs: true');
SELECT is(pg_temp.status(:rc), 'queued', 'the child is queued again');
SELECT is(pg_temp.take(:rc), 2::bigint, 'fixture: claimed again');
SELECT is(runq.fail(:rc, 2, '{"code": "x"}'), true, 'fixture: and fails again');
SELECT is(runq.complete(:rp, 1), true, 'the parent succeeds');
SELECT pg_temp.remember(:rc);
SELECT throws_ok(format('SELECT runq.redrive(%s)', :rc), 'RQ004',
                 format('run %s is a child of run %s, which is succeeded', :rc, :rp),
                 'redrive of a child whose parent is terminal: RQ004 naming the parent');
SELECT is(pg_temp.state(:rc), pg_temp.remembered(:rc), 'the refused redrive changed nothing');

-- A redriven parent: its keys still name the children it had.
SELECT pg_temp.running(4181, 'rf-p') AS rf \gset
SELECT runq.spawn(:rf, 1, 'c', 'rf-c') AS rf1 \gset
SELECT is(runq.fail(:rf, 1, '{"code": "x"}'), true, 'the parent fails');
SELECT is(pg_temp.status(:rf1), 'cancelled', 'its queued child is cancelled');
SELECT is(runq.redrive(:rf), true, 'the parent is redriven');
SELECT is(pg_temp.take(:rf), 2::bigint, 'and claimed again under epoch 2');
SELECT is(runq.spawn(:rf, 2, 'c', 'rf-c'), :rf1::bigint, 'a spawn of the same key: the cancelled child, nothing new');
SELECT is(pg_temp.status(:rf1), 'cancelled', 'which stays cancelled');
SELECT isnt(runq.spawn(:rf, 2, 'c2', 'rf-c'), NULL::bigint, 'a new key: a fresh child');
SELECT is(cardinality(pg_temp.children_of(:rf)), 2, 'the parent has two children');

-- ---------------------------------------------------------------------------
-- purge of a parent leaves its children
-- ---------------------------------------------------------------------------
SELECT pg_temp.running(4185, 'pg-p') AS pp \gset
SELECT pg_temp.child(:pp, 'c', 'pg-c') AS pc \gset
SELECT is(runq.complete(:pc, 1) AND runq.complete(:pp, 1), true, 'fixture: a child and its parent succeed');
UPDATE runq.runs SET finished_at = now() - interval '2 days' WHERE run_id = :pp;
SELECT is(runq.purge(interval '1 day'), 1::bigint, 'purge: the old parent is purged');
SELECT throws_ok(format('SELECT * FROM runq.get_run(%s)', :pp), 'RQ003', format('run %s not found', :pp),
                 'purge: the parent is gone');
SELECT throws_ok(format('SELECT * FROM runq.children(%s)', :pp), 'RQ003', format('run %s not found', :pp),
                 'purge: children of the purged parent is RQ003');
SELECT results_eq(format('SELECT status, parent_run_id FROM runq.get_run(%s)', :pc),
                  format($$VALUES ('succeeded'::text, %s::bigint)$$, :pp),
                  'purge: the recent child stays, still naming its purged parent');
UPDATE runq.runs SET finished_at = now() - interval '2 days' WHERE run_id = :pc;
SELECT is(runq.purge(interval '1 day'), 1::bigint, 'purge: the child is purged by its own age');

-- ---------------------------------------------------------------------------
-- Grants and security
-- ---------------------------------------------------------------------------
SELECT is_definer('runq', 'spawn', ARRAY['bigint', 'bigint', 'text', 'text', 'jsonb', 'integer', 'integer', 'text', 'interval', 'jsonb']::name[],
                  'spawn is SECURITY DEFINER');
SELECT is_definer('runq', 'wait_children', ARRAY['bigint', 'bigint']::name[], 'wait_children is SECURITY DEFINER');
SELECT is_definer('runq', 'children', ARRAY['bigint']::name[], 'children is SECURITY DEFINER');
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc AS p
            WHERE p.oid = 'runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb)'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp'], 'spawn pins search_path = pg_catalog, pg_temp');
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc AS p WHERE p.oid = 'runq.wait_children(bigint, bigint)'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp'], 'wait_children pins search_path = pg_catalog, pg_temp');
SELECT is((SELECT p.proconfig FROM pg_catalog.pg_proc AS p WHERE p.oid = 'runq.children(bigint)'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp'], 'children pins search_path = pg_catalog, pg_temp');

CREATE TEMP TABLE grants (fn name, argtypes name[], roles text[]) ON COMMIT DROP;
INSERT INTO grants VALUES
    ('spawn',         ARRAY['bigint', 'bigint', 'text', 'text', 'jsonb', 'integer', 'integer', 'text', 'interval', 'jsonb']::name[],
                      ARRAY['runq_admin', 'runq_worker']),
    ('wait_children', ARRAY['bigint', 'bigint'], ARRAY['runq_admin', 'runq_worker']),
    ('children',      ARRAY['bigint'], ARRAY['runq_admin', 'runq_client', 'runq_observer', 'runq_worker']);
-- 3 x 5 = 15 tests.
SELECT function_privs_are('runq', g.fn, g.argtypes, r.role,
                          CASE WHEN r.role = ANY (g.roles) THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END,
                          format('%s %s execute runq.%s', r.role,
                                 CASE WHEN r.role = ANY (g.roles) THEN 'can' ELSE 'cannot' END, g.fn))
  FROM grants AS g,
       unnest(ARRAY['public', 'runq_client', 'runq_worker', 'runq_admin', 'runq_observer']) WITH ORDINALITY AS r (role, n)
 ORDER BY g.fn, r.n;

-- And from outside, under SET ROLE.
SELECT pg_temp.running(4190, 'gr-p') AS gp \gset
SELECT pg_temp.running(4191, 'gr-a') AS ga \gset
SET ROLE runq_worker;
SELECT runq.spawn(:gp, 1, 'w', 'gr-w') AS gw \gset
SELECT results_eq(format('SELECT key, run_id FROM runq.children(%s)', :gp), format($$VALUES ('w'::text, %s::bigint)$$, :gw),
                  'runq_worker spawns, and reads the children');
SELECT is(runq.wait_children(:gp, 1), true, 'runq_worker waits for the children');
RESET ROLE;
SET ROLE runq_client;
SELECT results_eq(format('SELECT key FROM runq.children(%s)', :gp), $$VALUES ('w'::text)$$, 'runq_client reads the children');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'c', 'gr-c')$$, :ga), '42501', NULL, 'runq_client may not spawn (42501)');
SELECT throws_ok(format('SELECT runq.wait_children(%s, 1)', :ga), '42501', NULL, 'runq_client may not wait_children (42501)');
RESET ROLE;
SET ROLE runq_observer;
SELECT results_eq(format('SELECT key FROM runq.children(%s)', :gp), $$VALUES ('w'::text)$$, 'runq_observer reads the children');
SELECT throws_ok(format($$SELECT runq.spawn(%s, 1, 'o', 'gr-o')$$, :ga), '42501', NULL, 'runq_observer may not spawn (42501)');
SELECT throws_ok(format('SELECT runq.wait_children(%s, 1)', :ga), '42501', NULL, 'runq_observer may not wait_children (42501)');
RESET ROLE;
SET ROLE runq_admin;
SELECT isnt(runq.spawn(:ga, 1, 'a', 'gr-a2'), NULL::bigint, 'runq_admin spawns');
SELECT is(runq.wait_children(:ga, 1), true, 'runq_admin waits for the children');
SELECT results_eq(format('SELECT key FROM runq.children(%s)', :ga), $$VALUES ('a'::text)$$, 'runq_admin reads the children');
RESET ROLE;
SELECT is(pg_temp.children_of(:ga), ARRAY(SELECT run_id FROM runq.children(:ga)), 'only the admin''s child was created');

SELECT * FROM finish();
ROLLBACK;
