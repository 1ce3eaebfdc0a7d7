-- The read-only surface (v0.2). runq_observer may run the read functions and
-- read the four views; every function it may run is STABLE, and every other
-- public function and every table refuses it with 42501. list_runs: newest
-- first, each filter and their combinations equal to a plain query, keyset
-- pages without gap or repeat, its errors (22023) change nothing.
-- throughput counts claims as started and terminal events as finished;
-- recovery_totals counts fencings and requeues. Classes 2900..2999; tenants
-- obs-*.
BEGIN;
SELECT plan(19);

CREATE ROLE runq_tap_observer_member NOLOGIN IN ROLE runq_observer;

-- Runs in every status: tenants obs-a and obs-b, kinds obs.x and obs.y.
CREATE TEMP TABLE made (run_id bigint, want text) ON COMMIT DROP;
INSERT INTO made
SELECT (runq.submit(tenant_id => 'obs-' || t, kind => 'obs.' || k, priority => 2900)).run_id, s
  FROM unnest(ARRAY['a', 'b']) AS t, unnest(ARRAY['x', 'y']) AS k,
       unnest(ARRAY['queued', 'running', 'waiting_for_user', 'succeeded', 'failed', 'cancelled']) AS s;
SELECT count(*) FROM runq.claim(ARRAY[2900], 'obs-w', max_runs => 24);
SELECT count(*) FROM made AS m, LATERAL (SELECT CASE m.want
    WHEN 'queued' THEN runq.release(m.run_id, 1)
    WHEN 'waiting_for_user' THEN runq.ask_user(m.run_id, 1, '{"q": "which?"}')
    WHEN 'succeeded' THEN runq.complete(m.run_id, 1, '{}')
    WHEN 'failed' THEN runq.fail(m.run_id, 1, '{"code": "x", "message": "y"}')
    WHEN 'cancelled' THEN runq.cancel(m.run_id) IS NOT NULL
    ELSE true END) AS x;
-- A released run is queued again; a cancelled running run ends at its next call.
SELECT runq.heartbeat(run_id, 1) FROM made WHERE want = 'cancelled';

SELECT is((SELECT count(*)::int FROM made AS m JOIN runq.runs AS r USING (run_id) WHERE r.status = m.want),
          24, 'runs in every status, for two tenants and two kinds');

-- Each combination of filters equals a plain query, newest first.
SELECT is((SELECT count(*)::int FROM
             unnest(ARRAY[NULL, 'queued', 'running', 'waiting_for_user', 'succeeded', 'failed', 'cancelled']) AS st,
             unnest(ARRAY[NULL, 'obs-a', 'obs-b']) AS te, unnest(ARRAY[NULL, 'obs.x', 'obs.y']) AS ki,
             LATERAL (SELECT array_agg(l.run_id ORDER BY l.run_id DESC) AS got
                        FROM runq.list_runs(st, te, ki, NULL, 5) AS l
                       WHERE l.tenant_id LIKE 'obs-%') AS a,
             LATERAL (SELECT array_agg(q.run_id ORDER BY q.run_id DESC) AS want
                        FROM (SELECT r.run_id FROM runq.runs AS r
                               WHERE (st IS NULL OR r.status = st) AND (te IS NULL OR r.tenant_id = te)
                                 AND (ki IS NULL OR r.kind = ki)
                               ORDER BY r.run_id DESC LIMIT 5) AS q
                       WHERE (SELECT r.tenant_id FROM runq.runs AS r WHERE r.run_id = q.run_id) LIKE 'obs-%') AS b
            WHERE te IS NOT NULL AND got IS DISTINCT FROM want),
          0, 'list_runs: every combination of status, tenant and kind equals a plain query');

-- Pages of 2 walk a tenant's twelve runs with no gap and no repeat.
WITH RECURSIVE page(n, ids) AS (
    SELECT 1, ARRAY(SELECT run_id FROM runq.list_runs(tenant_id => 'obs-a', max_runs => 2))
    UNION ALL
    SELECT n + 1, ARRAY(SELECT run_id FROM runq.list_runs(tenant_id => 'obs-a', max_runs => 2,
                                                          before_run_id => ids[cardinality(ids)]))
      FROM page WHERE cardinality(ids) = 2)
SELECT is((SELECT array_agg(i ORDER BY n, o) FROM page, unnest(ids) WITH ORDINALITY AS u(i, o)),
          (SELECT array_agg(r.run_id ORDER BY r.run_id DESC) FROM runq.runs AS r WHERE r.tenant_id = 'obs-a'),
          'list_runs: keyset pages of 2 give every run of the tenant once, newest first');

SELECT is((SELECT row(l.*)::text FROM runq.list_runs(tenant_id => 'obs-b', max_runs => 1) AS l),
          (SELECT row(g.*)::text FROM runq.get_run((SELECT max(run_id) FROM made m JOIN runq.runs r USING (run_id)
                                                     WHERE r.tenant_id = 'obs-b')) AS g),
          'list_runs: a row has the columns and values of get_run');

SELECT throws_ok($$SELECT * FROM runq.list_runs(status => 'done')$$, '22023',
                 'status must be one of queued, running, waiting_for_user, succeeded, failed, cancelled, got ''done''',
                 'list_runs: an unknown status is 22023 naming it');
SELECT throws_ok($$SELECT * FROM runq.list_runs(max_runs => 0)$$, '22023',
                 'max_runs must be at least 1, got 0', 'list_runs: max_runs 0 is 22023');
SELECT throws_ok($$SELECT * FROM runq.list_runs(tenant_id => '')$$, '22023', NULL,
                 'list_runs: an empty tenant_id is 22023');
SELECT throws_ok($$SELECT * FROM runq.list_runs(kind => repeat('k', 257))$$, '22023', NULL,
                 'list_runs: a kind over 256 characters is 22023');

-- throughput: 24 claims this minute; 12 finished (succeeded, failed, cancelled).
SELECT is((SELECT (sum(started), sum(finished))::text FROM runq.throughput(now() - interval '1 minute')),
          (SELECT (count(*) FILTER (WHERE type = 'run.claimed'),
                   count(*) FILTER (WHERE type IN ('run.succeeded', 'run.failed', 'run.cancelled')))::text
             FROM runq.run_events WHERE created_at >= now() - interval '1 minute'),
          'throughput counts the claims as started and the terminal events as finished');
SELECT ok((SELECT sum(started) >= 24 AND sum(finished) >= 12 FROM runq.throughput(now() - interval '1 minute')),
          'throughput sees this file''s claims and finishes');
SELECT is((SELECT count(*)::int FROM runq.throughput(now() + interval '1 hour')), 0,
          'throughput: no minute without events');
SELECT throws_ok($$SELECT * FROM runq.throughput(NULL)$$, '22023', 'since must be a finite time, got NULL',
                 'throughput: a NULL since is 22023');
SELECT throws_ok($$SELECT * FROM runq.throughput('infinity')$$, '22023', NULL,
                 'throughput: an infinite since is 22023');

-- recovery_totals: a stale epoch's call adds one fencing.
CREATE TEMP TABLE before AS SELECT * FROM runq.recovery_totals();
SELECT is(runq.heartbeat((SELECT run_id FROM made WHERE want = 'queued' LIMIT 1), 7), false,
          'a heartbeat under an epoch the run never had is refused');
SELECT is((SELECT fenced - (SELECT fenced FROM before) FROM runq.recovery_totals()), 0::bigint,
          'an epoch never held is not a fencing');
SELECT runq.claim(ARRAY[2900], 'obs-w2', max_runs => 1);
SELECT is(runq.heartbeat((SELECT run_id FROM made m JOIN runq.runs r USING (run_id) WHERE r.lease_epoch = 2 LIMIT 1), 1),
          false, 'a heartbeat of the first epoch after a second claim is fenced');
SELECT is((SELECT fenced - (SELECT fenced FROM before) FROM runq.recovery_totals()), 1::bigint,
          'recovery_totals counts the fencing');

-- The observer: what it may run is STABLE, and it can write nothing.
SET LOCAL ROLE runq_tap_observer_member;
SELECT is((SELECT count(*)::int FROM runq.list_runs(tenant_id => 'obs-a')), 12,
          'the observer lists runs');
SELECT throws_ok($$SELECT runq.submit('obs-c', 'obs.x')$$, '42501', NULL,
                 'the observer may not submit');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
