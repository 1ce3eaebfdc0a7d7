-- runq.purge: deletes up to max_runs succeeded and cancelled runs (failed ones
-- too with include_failed) that finished more than older_than ago, lowest
-- run_id first, with their events, checkpoints, inputs, tool calls and
-- idempotency keys, and returns how many runs it deleted; a purged key can be
-- used again (created, a new run). Queued, running and waiting_for_user runs,
-- recent runs, failed runs by default and other runs' rows are kept. Bad
-- arguments raise 22023 naming the value and change nothing; only runq_admin
-- may purge. Priority classes 3500..3599, tenant 'pur'.
BEGIN;
SELECT plan(59);

\ir helpers/recovery.sql

-- How many rows runq holds for one run: runs, run_events, checkpoints,
-- inputs, tool_calls, idempotency_keys, run_usage.
CREATE FUNCTION pg_temp.held(bigint) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT ARRAY[(SELECT count(*) FROM runq.runs AS r WHERE r.run_id = $1),
                 (SELECT count(*) FROM runq.run_events AS e WHERE e.run_id = $1),
                 (SELECT count(*) FROM runq.checkpoints AS c WHERE c.run_id = $1),
                 (SELECT count(*) FROM runq.inputs AS i WHERE i.run_id = $1),
                 (SELECT count(*) FROM runq.tool_calls AS t WHERE t.run_id = $1),
                 (SELECT count(*) FROM runq.idempotency_keys AS k WHERE k.run_id = $1),
                 (SELECT count(*) FROM runq.run_usage AS u WHERE u.run_id = $1)]
$$;
-- Everything runq keeps about some runs, as text, to compare before and after.
CREATE FUNCTION pg_temp.state(bigint[]) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT json_agg(r ORDER BY r.run_id)::text FROM runq.runs AS r WHERE r.run_id = ANY ($1)),
        (SELECT json_agg(e ORDER BY e.run_id, e.event_id)::text FROM runq.run_events AS e WHERE e.run_id = ANY ($1)),
        (SELECT json_agg(c ORDER BY c.run_id, c.seq)::text FROM runq.checkpoints AS c WHERE c.run_id = ANY ($1)),
        (SELECT json_agg(i ORDER BY i.run_id, i.seq)::text FROM runq.inputs AS i WHERE i.run_id = ANY ($1)),
        (SELECT json_agg(t ORDER BY t.run_id, t.call_id)::text FROM runq.tool_calls AS t WHERE t.run_id = ANY ($1)),
        (SELECT json_agg(k ORDER BY k.run_id, k.idempotency_key)::text FROM runq.idempotency_keys AS k
          WHERE k.run_id = ANY ($1)),
        (SELECT json_agg(u ORDER BY u.run_id)::text FROM runq.run_usage AS u WHERE u.run_id = ANY ($1)))
$$;

-- fixture: start from no finished runs at all, so that the batch counts below
-- are this file's runs only (rolled back with everything else).
SELECT runq.purge(interval '0', 2147483647, true) AS pre_purged \gset

-- ---------------------------------------------------------------------------
-- Fixtures, in run_id order
-- ---------------------------------------------------------------------------
-- r_full: succeeded after a checkpoint, a tool call and a question answered
-- with deliver_input, keyed, with a fenced write after the end.
SELECT run_id AS r_full FROM runq.submit(tenant_id => 'pur', kind => 'k', payload => '{"n": 1}',
                                         session_id => 'pur-1', priority => 3500,
                                         idempotency_key => 'pur-key-1') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3500], lease => interval '1 hour') \gset
SELECT ok(runq.checkpoint(:r_full, :e, '{"step": 1}')
          AND runq.begin_tool(:r_full, :e, 'c1', 'lookup', 'read_only')
          AND runq.end_tool(:r_full, :e, 'c1', '{"hits": 2}')
          AND runq.ask_user(:r_full, :e, '{"q": "which?"}'),
          'fixture: the run checkpoints, calls a tool and asks the user');
SELECT is(runq.deliver_input(:r_full, '{"a": "that one"}'), true, 'fixture: the user answers');
SELECT epoch AS e FROM runq.claim(ARRAY[3500], lease => interval '1 hour') \gset
SELECT is(runq.complete(:r_full, :e, '{"done": true}'), true, 'fixture: the run succeeds');
SELECT is(runq.complete(:r_full, 1), false, 'fixture: a stale write after the end is fenced');
SELECT is(pg_temp.events(:r_full),
          ARRAY['run.created@0', 'run.claimed@1', 'run.checkpointed@1', 'run.tool_started@1',
                'run.tool_finished@1', 'run.waiting_for_user@1', 'run.input_delivered@1', 'run.claimed@2',
                'run.succeeded@2', 'run.fenced@1'],
          'fixture: the run''s events, a run.fenced last');
-- fixture: usage totals, as runq.record_usage leaves them (its events are
-- no different from the others here).
INSERT INTO runq.run_usage (run_id, usage) VALUES (:r_full, '{"cost_usd": 0.5}');
SELECT is(pg_temp.held(:r_full), ARRAY[1, 10, 1, 1, 1, 1, 1]::bigint[],
          'fixture: the run has a row, 10 events, a checkpoint, an input, a tool call, a key and usage totals');
SELECT results_eq($$SELECT run_id, outcome FROM runq.submit(tenant_id => 'pur', kind => 'k', payload => '{"n": 1}',
                      session_id => 'pur-1', priority => 3500, idempotency_key => 'pur-key-1')$$,
                  format($$VALUES (%s::bigint, 'duplicate'::text)$$, :r_full),
                  'fixture: before the purge, its key answers duplicate with the run');

-- r_recent: succeeded just now, keyed, with a checkpoint and a tool call.
SELECT run_id AS r_recent FROM runq.submit(tenant_id => 'pur', kind => 'k', priority => 3501,
                                           idempotency_key => 'pur-key-2') \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3501]) \gset
SELECT ok(runq.checkpoint(:r_recent, :e, '{"step": 1}')
          AND runq.begin_tool(:r_recent, :e, 'c1', 'lookup', 'read_only')
          AND runq.end_tool(:r_recent, :e, 'c1', '{}')
          AND runq.complete(:r_recent, :e),
          'fixture: a recent run checkpoints, calls a tool and succeeds');

-- r_queued, r_running (with a checkpoint, an input and a started tool call)
-- and r_wait: not finished.
SELECT run_id AS r_queued FROM runq.submit(tenant_id => 'pur', kind => 'k', priority => 3502,
                                           idempotency_key => 'pur-key-3') \gset
SELECT run_id AS r_running FROM runq.submit(tenant_id => 'pur', kind => 'k', session_id => 'pur-3',
                                            priority => 3503) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3503], lease => interval '1 hour') \gset
SELECT ok(runq.checkpoint(:r_running, :e, '{"step": 1}')
          AND runq.ask_user(:r_running, :e, '{"q": "go?"}')
          AND runq.deliver_input(:r_running, '{"a": "go"}'),
          'fixture: a run checkpoints, asks the user and gets an answer');
SELECT epoch AS e FROM runq.claim(ARRAY[3503], lease => interval '1 hour') \gset
SELECT is(runq.begin_tool(:r_running, :e, 'c1', 'send_mail', 'non_idempotent'), true,
          'fixture: claimed again, it starts a tool call');
INSERT INTO runq.run_usage (run_id, usage) VALUES (:r_running, '{"cost_usd": 0.25}');
SELECT run_id AS r_wait FROM runq.submit(tenant_id => 'pur', kind => 'k', session_id => 'pur-2',
                                         priority => 3504) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3504], lease => interval '1 hour') \gset
SELECT is(runq.ask_user(:r_wait, :e, '{"q": "sure?"}'), true, 'fixture: a run waits for the user');

-- r_failed, r_cancel (cancelled while queued, keyed) and r_plain (succeeded).
SELECT run_id AS r_failed FROM runq.submit(tenant_id => 'pur', kind => 'k', priority => 3505) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3505]) \gset
SELECT is(runq.fail(:r_failed, :e, '{"code": "tool_error"}'), true, 'fixture: a run fails');
SELECT run_id AS r_cancel FROM runq.submit(tenant_id => 'pur', kind => 'k', priority => 3506,
                                           idempotency_key => 'pur-key-4') \gset
SELECT is(runq.cancel(:r_cancel), 'cancelled', 'fixture: a queued run is cancelled');
SELECT run_id AS r_plain FROM runq.submit(tenant_id => 'pur', kind => 'k', priority => 3507) \gset
SELECT epoch AS e FROM runq.claim(ARRAY[3507]) \gset
SELECT is(runq.complete(:r_plain, :e), true, 'fixture: another run succeeds');

-- fixture: r_full, r_failed and r_plain finished two days ago, r_cancel five
-- days ago (so finished_at order would take it before r_full).
UPDATE runq.runs SET finished_at = finished_at - interval '2 days'
 WHERE run_id IN (:r_full, :r_failed, :r_plain);
UPDATE runq.runs SET finished_at = finished_at - interval '5 days' WHERE run_id = :r_cancel;

CREATE TEMP TABLE mine ON COMMIT DROP AS
SELECT ARRAY[:r_full, :r_recent, :r_queued, :r_running, :r_wait, :r_failed, :r_cancel, :r_plain]::bigint[] AS ids;
CREATE TEMP TABLE kept ON COMMIT DROP AS
SELECT pg_temp.state(ARRAY[:r_recent, :r_queued, :r_running, :r_wait]::bigint[]) AS recent_and_active,
       pg_temp.state(ARRAY[:r_failed]::bigint[]) AS failed,
       pg_temp.held(:r_running) AS running_held;
CREATE TEMP TABLE before ON COMMIT DROP AS SELECT pg_temp.state((SELECT ids FROM mine)) AS state;

-- ---------------------------------------------------------------------------
-- Privileges: only runq_admin
-- ---------------------------------------------------------------------------
SET ROLE runq_worker;
SELECT throws_ok($$SELECT runq.purge(interval '1 day')$$, '42501', NULL, 'runq_worker may not purge (42501)');
RESET ROLE;
SET ROLE runq_client;
SELECT throws_ok($$SELECT runq.purge(interval '1 day')$$, '42501', NULL, 'runq_client may not purge (42501)');
RESET ROLE;

-- ---------------------------------------------------------------------------
-- Bad arguments: 22023, naming the value
-- ---------------------------------------------------------------------------
SELECT throws_ok($$SELECT runq.purge(older_than => NULL)$$, '22023',
                 'older_than must be at least 0 and under 1000 years, got NULL',
                 'older_than NULL: 22023, got NULL');
SELECT throws_ok($$SELECT runq.purge(older_than => interval '-1 second')$$, '22023',
                 format('older_than must be at least 0 and under 1000 years, got %s', interval '-1 second'),
                 'older_than negative: 22023, with the value');
SELECT throws_ok($$SELECT runq.purge(older_than => interval '1000 years')$$, '22023',
                 format('older_than must be at least 0 and under 1000 years, got %s', interval '1000 years'),
                 'older_than 1000 years: 22023, with the value');
SELECT throws_ok($$SELECT runq.purge(older_than => interval '2000 years', max_runs => 10, include_failed => true)$$,
                 '22023',
                 format('older_than must be at least 0 and under 1000 years, got %s', interval '2000 years'),
                 'older_than over 1000 years: 22023, with the value');
SELECT throws_ok($$SELECT runq.purge(older_than => interval '1 day', max_runs => NULL)$$, '22023',
                 'max_runs must be at least 1, got NULL', 'max_runs NULL: 22023, got NULL');
SELECT throws_ok($$SELECT runq.purge(older_than => interval '1 day', max_runs => 0)$$, '22023',
                 'max_runs must be at least 1, got 0', 'max_runs 0: 22023, got 0');
SELECT throws_ok($$SELECT runq.purge(older_than => interval '1 day', max_runs => -7)$$, '22023',
                 'max_runs must be at least 1, got -7', 'max_runs negative: 22023, got -7');
SELECT throws_ok($$SELECT runq.purge(older_than => interval '1 day', include_failed => NULL)$$, '22023',
                 'include_failed must be true or false, got NULL', 'include_failed NULL: 22023, got NULL');
SELECT is(pg_temp.state((SELECT ids FROM mine)), (SELECT state FROM before),
          'the refused calls (42501 and 22023) changed nothing');

-- Just inside the bound is accepted; nothing finished 999 years ago.
SELECT is(runq.purge(interval '999 years', 1000, true), 0::bigint, 'older_than 999 years is accepted: 0 runs');

-- ---------------------------------------------------------------------------
-- max_runs and order: lowest run_id first, not oldest finished_at
-- ---------------------------------------------------------------------------
SET ROLE runq_admin;
SELECT runq.purge(interval '1 day', max_runs => 1) AS n \gset
RESET ROLE;
SELECT is(:n::bigint, 1::bigint, 'runq_admin purges; max_runs 1 deletes 1 run and returns 1');
SELECT is(pg_temp.held(:r_full), ARRAY[0, 0, 0, 0, 0, 0, 0]::bigint[],
          'the lowest run_id went first: r_full, its events, checkpoint, input, tool call, key and usage totals are gone');
SELECT throws_ok(format('SELECT * FROM runq.run_events(%s)', :r_full), 'RQ003', NULL,
                 'the purged run is no longer found (RQ003)');
SELECT is(pg_temp.held(:r_cancel), ARRAY[1, 2, 0, 0, 0, 1, 0]::bigint[],
          'the cancelled run, finished earlier but with a higher run_id, waits for the next batch');
SELECT is(pg_temp.held(:r_plain), ARRAY[1, 3, 0, 0, 0, 0, 0]::bigint[], 'r_plain is kept by the batch limit');

SELECT is(runq.purge(interval '1 day', max_runs => 1), 1::bigint, 'the next batch of 1 deletes 1');
SELECT is(pg_temp.held(:r_cancel), ARRAY[0, 0, 0, 0, 0, 0, 0]::bigint[],
          'a cancelled run is purged, with its events and key');
SELECT is(pg_temp.held(:r_plain), ARRAY[1, 3, 0, 0, 0, 0, 0]::bigint[], 'r_plain is still kept by the batch limit');

-- ---------------------------------------------------------------------------
-- What is kept: recent, unfinished, failed by default; other runs' rows
-- ---------------------------------------------------------------------------
SET ROLE runq_admin;
SELECT runq.purge(interval '1 day') AS n \gset
RESET ROLE;
SELECT is(:n::bigint, 1::bigint, 'the default batch deletes the one old succeeded run left and returns 1');
SELECT is(pg_temp.held(:r_plain), ARRAY[0, 0, 0, 0, 0, 0, 0]::bigint[], 'r_plain is purged');
SELECT is(runq.purge(interval '1 day'), 0::bigint, 'a repeat call returns 0');
SELECT is(pg_temp.state(ARRAY[:r_failed]::bigint[]), (SELECT failed FROM kept),
          'an old failed run is kept by default, with its events');
SELECT is((SELECT status FROM runq.get_run(:r_failed)), 'failed', 'the failed run is still in the dead letter');
SELECT is(pg_temp.state(ARRAY[:r_recent, :r_queued, :r_running, :r_wait]::bigint[]),
          (SELECT recent_and_active FROM kept),
          'the recent succeeded run and the queued, running and waiting runs are untouched, rows and all');
SELECT is(pg_temp.held(:r_recent), ARRAY[1, 6, 1, 0, 1, 1, 0]::bigint[],
          'the recent run keeps its events, checkpoint, tool call and key');
SELECT results_eq($$SELECT run_id, outcome FROM runq.submit(tenant_id => 'pur', kind => 'k', priority => 3501,
                      idempotency_key => 'pur-key-2')$$,
                  format($$VALUES (%s::bigint, 'duplicate'::text)$$, :r_recent),
                  'the recent run''s key still answers duplicate');

-- include_failed
SET ROLE runq_admin;
SELECT runq.purge(interval '1 day', include_failed => true) AS n \gset
RESET ROLE;
SELECT is(:n::bigint, 1::bigint, 'include_failed: the old failed run is purged, returns 1');
SELECT is(pg_temp.held(:r_failed), ARRAY[0, 0, 0, 0, 0, 0, 0]::bigint[], 'include_failed: the failed run and its events are gone');
SELECT is(runq.purge(interval '1 day', include_failed => true), 0::bigint, 'include_failed: a repeat call returns 0');

-- ---------------------------------------------------------------------------
-- older_than 0: finished runs of any age, never unfinished ones
-- ---------------------------------------------------------------------------
SELECT is(runq.purge(interval '0'), 1::bigint, 'older_than 0 purges the run that finished moments ago');
SELECT is(pg_temp.held(:r_recent), ARRAY[0, 0, 0, 0, 0, 0, 0]::bigint[],
          'older_than 0: the recent run, its checkpoint, tool call and key are gone');
SELECT is(runq.purge(interval '0', 2147483647, true), 0::bigint,
          'older_than 0, include_failed, no limit: nothing unfinished is purged');
SELECT results_eq(format($$SELECT run_id, status::text FROM runq.runs WHERE run_id = ANY ('%s'::bigint[]) ORDER BY run_id$$,
                         (SELECT ids FROM mine)),
                  format($$VALUES (%s::bigint, 'queued'::text), (%s, 'running'), (%s, 'waiting_for_user')$$,
                         :r_queued, :r_running, :r_wait),
                  'of this file''s runs, exactly the queued, running and waiting ones remain');
SELECT is(pg_temp.held(:r_running), (SELECT running_held FROM kept),
          'the running run keeps its events, checkpoint, input and started tool call');
SELECT is(pg_temp.held(:r_running), ARRAY[1, 7, 1, 1, 1, 0, 1]::bigint[],
          'the running run: a row, 7 events, a checkpoint, an input, a tool call, usage totals');
SELECT is(pg_temp.held(:r_queued), ARRAY[1, 1, 0, 0, 0, 1, 0]::bigint[], 'the queued run keeps its event and key');
SELECT is(pg_temp.held(:r_wait), ARRAY[1, 3, 0, 0, 0, 0, 0]::bigint[], 'the waiting run keeps its events');
SELECT is((SELECT question FROM runq.get_run(:r_wait)), '{"q": "sure?"}'::jsonb,
          'the waiting run still waits for its answer');

-- ---------------------------------------------------------------------------
-- A purged idempotency key is free again
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE again ON COMMIT DROP AS
SELECT * FROM runq.submit(tenant_id => 'pur', kind => 'k', payload => '{"n": 1}', session_id => 'pur-1',
                          priority => 3500, idempotency_key => 'pur-key-1');
SELECT is((SELECT outcome FROM again), 'created', 'the purged run''s key, same request: created');
SELECT cmp_ok((SELECT run_id FROM again), '>', :r_full::bigint, 'created as a new run, with a new run_id');
SELECT results_eq($$SELECT k.run_id FROM runq.idempotency_keys AS k
                     WHERE k.tenant_id = 'pur' AND k.idempotency_key = 'pur-key-1'$$,
                  'SELECT run_id FROM again', 'the key now belongs to the new run');
SELECT is(pg_temp.events((SELECT run_id FROM again)), ARRAY['run.created@0'],
          'the new run starts its own history');
SELECT run_id AS r_k4, outcome AS o_k4
  FROM runq.submit(tenant_id => 'pur', kind => 'k', priority => 3506, idempotency_key => 'pur-key-4') \gset
SELECT ok(:'o_k4' = 'created' AND :r_k4 > :r_cancel,
          'the purged cancelled run''s key also creates a new run');

SELECT * FROM finish();
ROLLBACK;
