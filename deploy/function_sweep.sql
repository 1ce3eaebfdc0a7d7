-- Deploy runq:function_sweep to pg
-- requires: function__wake_parents
-- requires: table_runs
-- requires: index_runs_held
-- requires: index_runs_queue_expiry
-- requires: function__expire_leases
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks
-- requires: admission
-- requires: index_runs_deadline
-- requires: stop_failures
-- requires: function__notify_watchers
-- requires: function__forget_watches

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called on a timer by worker pools and operators, from any number of
-- processes at once: every pick is FOR UPDATE SKIP LOCKED, so concurrent
-- sweepers split the work and a run is decided once. Up to max_runs runs in
-- all: first running runs whose lease has expired or whose deadline has
-- passed (soonest due first, through runq._expire_leases), then queued and
-- waiting runs past their deadline, then queued runs past their queue_ttl.
-- Raises 22023 (max_runs NULL or below 1).
--
-- max_runs is checked by runq._check_count.
--
-- It ends with runq._rebalance(false), the backstop
-- of the admissions (deploy/admission.sql), and an admitted run it expires
-- hands its slot on. It fails runs past their deadline (deadline_exceeded),
-- in any status not terminal. Running runs past their deadline are found in
-- the walk of the running runs that finds expired leases: runs_deadline_idx
-- holds queued and waiting runs only, so that a claim and a complete write
-- no entry there (deploy/index_runs_deadline.sql).
-- A pass that fails queued runs hands their slots on only after its
-- statement: a hand-on inside it could admit a parked run the same statement
-- is about to fail (27000, and the whole sweep rolled back).
CREATE OR REPLACE FUNCTION runq.sweep(max_runs integer DEFAULT 1000)
    RETURNS TABLE(run_id bigint, action text)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- Generic plans, made once per session: with many runs holding deadlines
    -- (or leases, or TTLs) the generic estimate of "past due" is a third of
    -- them, so the plan cache kept choosing a custom plan and planned the
    -- deadline pick on every sweep (0.75 against 0.2 ms a sweep with 100,000
    -- deadlines, none due). Each pick is an index range that is empty, or
    -- small, when the sweep keeps up: the generic plan is the right one.
    SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_expired  bigint[];
    v_queued   bigint[];  -- past their deadline: queued
    v_waiting  bigint[];  --   waiting_for_user
    v_left     integer;   -- of max_runs
    v_failed   bigint[];  -- failed by a pass below, and
    v_tenants  text[];    --   the keys of those of them that held a slot
    v_kinds    text[];
    v_family   bigint[];  -- the parents of the children this sweep may end
    v_spawned  bigint[];  -- ended by a pass below with children, and
    v_parents  bigint[];  --   the parents of those ended with one
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs them as one expression; a PERFORM
    -- would run them as a statement of its own.
    IF runq._check_count('max_runs', sweep.max_runs) THEN
    END IF;

    -- Child runs this sweep may end: their parents are locked first, before
    -- any pass below locks a run (the lock order of runq._cancel_children, a
    -- run before its children: runq.complete says why). The passes take a
    -- child only if its parent is one of these; another waits for the next
    -- sweep. Three probes of the indexes the passes read, when no run has a
    -- parent.
    v_family := ARRAY(
        (SELECT r.parent_run_id FROM runq.runs AS r
          WHERE r.status = 'running' AND r.parent_run_id IS NOT NULL
            AND (r.lease_expires_at < v_now OR r.deadline <= v_now)
          LIMIT sweep.max_runs)
        UNION
        (SELECT r.parent_run_id FROM runq.runs AS r
          WHERE r.deadline IS NOT NULL AND r.parent_run_id IS NOT NULL
            AND r.status IN ('queued', 'waiting_for_user', 'waiting_for_children')
            AND r.deadline <= v_now
          LIMIT sweep.max_runs)
        UNION
        (SELECT r.parent_run_id FROM runq.runs AS r
          WHERE r.status = 'queued' AND r.parent_run_id IS NOT NULL AND r.expires_at <= v_now
          LIMIT sweep.max_runs));
    IF cardinality(v_family) > 0 THEN
        PERFORM FROM runq.runs AS p
         WHERE p.run_id = ANY (v_family)
         ORDER BY p.run_id
           FOR NO KEY UPDATE;
    END IF;

    -- Running runs whose lease expired or whose deadline passed: both take
    -- the lease-expiry path, where a cancel flag comes first, then the
    -- deadline. One walk of the running runs (runs_held_idx), as many as
    -- the workers hold; least() passes over a NULL deadline.
    SELECT coalesce(array_agg(x.run_id), '{}') INTO v_expired
      FROM (SELECT r.run_id
              FROM runq.runs AS r
             WHERE r.status = 'running'
               AND (r.lease_expires_at < v_now OR r.deadline <= v_now)
               AND (r.parent_run_id IS NULL OR r.parent_run_id = ANY (v_family))
             ORDER BY least(r.lease_expires_at, r.deadline), r.run_id
             LIMIT sweep.max_runs
               FOR UPDATE SKIP LOCKED) AS x;

    IF cardinality(v_expired) > 0 THEN
        RETURN QUERY SELECT e.run_id, e.action
                       FROM runq._expire_leases(v_expired, false, v_now) AS e;
    END IF;

    -- Queued and waiting runs past their deadline. Nothing due: one probe of
    -- runs_deadline_idx.
    v_left := sweep.max_runs - cardinality(v_expired);
    IF v_left > 0 THEN
        SELECT coalesce(array_agg(x.run_id) FILTER (WHERE x.status = 'queued'), '{}'),
               coalesce(array_agg(x.run_id) FILTER (WHERE x.status <> 'queued'), '{}')
          INTO v_queued, v_waiting
          FROM (SELECT r.run_id, r.status
                  FROM runq.runs AS r
                 WHERE r.deadline IS NOT NULL
                   AND r.status IN ('queued', 'waiting_for_user', 'waiting_for_children')
                   AND r.deadline <= v_now
                   AND (r.parent_run_id IS NULL OR r.parent_run_id = ANY (v_family))
                 ORDER BY r.deadline, r.run_id
                 LIMIT v_left
                   FOR UPDATE SKIP LOCKED) AS x;
        v_left := v_left - cardinality(v_queued) - cardinality(v_waiting);
    END IF;

    IF cardinality(v_queued) + cardinality(v_waiting) > 0 THEN
        PERFORM runq._resolve_tool_calls(v_queued || v_waiting, v_now);
        WITH failed AS (
            UPDATE runq.runs AS r
               SET status = 'failed', failure = runq._stop_failure(r, false, v_now),
                   question = NULL, waiting_on = NULL, finished_at = v_now, updated_at = v_now
             WHERE r.run_id = ANY (v_queued || v_waiting)
            -- An admitted queued run held a slot of its keys' limits; a
            -- parked or a waiting one held none.
            RETURNING r.run_id, r.lease_epoch, r.failure, r.tenant_id, r.kind,
                      r.run_id = ANY (v_queued) AND NOT r.parked AS held_slot,
                      r.spawned, r.parent_run_id
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT f.run_id, f.lease_epoch, 'run.failed', f.failure, v_now
              FROM failed AS f
        )
        SELECT coalesce(array_agg(f.run_id ORDER BY f.run_id), '{}'),
               coalesce(array_agg(f.tenant_id::text) FILTER (WHERE f.held_slot), '{}'),
               coalesce(array_agg(f.kind::text) FILTER (WHERE f.held_slot), '{}'),
               array_agg(f.run_id) FILTER (WHERE f.spawned IS NOT NULL),
               array_agg(f.parent_run_id) FILTER (WHERE f.parent_run_id IS NOT NULL)
          INTO v_failed, v_tenants, v_kinds, v_spawned, v_parents
          FROM failed AS f;
        PERFORM runq._slot_left(k.tenant_id, k.kind)
           FROM unnest(v_tenants, v_kinds) AS k (tenant_id, kind)
          WHERE EXISTS (SELECT FROM runq.limit_settings);
        PERFORM runq._notify_watchers(v_failed);
        PERFORM runq._family_ended(v_spawned, v_parents, v_now);
        RETURN QUERY SELECT f.run_id, 'deadline_exceeded'::text FROM unnest(v_failed) AS f (run_id);
    END IF;

    IF v_left > 0 THEN
        WITH overdue AS (
            SELECT r.run_id
              FROM runq.runs AS r
             WHERE r.status = 'queued'
               AND r.expires_at <= v_now
               AND (r.parent_run_id IS NULL OR r.parent_run_id = ANY (v_family))
               -- a run requeued just above is decided for this sweep
               AND r.run_id <> ALL (v_expired)
             ORDER BY r.expires_at, r.run_id
             LIMIT v_left
               FOR UPDATE SKIP LOCKED
        ), expired AS (
            UPDATE runq.runs AS r
               SET status = 'failed',
                   failure = jsonb_build_object(
                       'code', 'queue_ttl_expired',
                       'message', format('queued longer than its queue_ttl of %s', r.queue_ttl),
                       'attempt', r.attempts, 'epoch', r.lease_epoch, 'at', v_now),
                   finished_at = v_now, updated_at = v_now
             -- an array, not a join, so no plan can hash all of runs
             WHERE r.run_id = ANY (ARRAY(SELECT o.run_id FROM overdue AS o))
            RETURNING r.run_id, r.lease_epoch, r.failure, r.tenant_id, r.kind, r.parked,
                      r.spawned, r.parent_run_id
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT x.run_id, x.lease_epoch, 'run.failed', x.failure, v_now
              FROM expired AS x
        )
        SELECT coalesce(array_agg(x.run_id ORDER BY x.run_id), '{}'),
               coalesce(array_agg(x.tenant_id::text) FILTER (WHERE NOT x.parked), '{}'),
               coalesce(array_agg(x.kind::text) FILTER (WHERE NOT x.parked), '{}'),
               array_agg(x.run_id) FILTER (WHERE x.spawned IS NOT NULL),
               array_agg(x.parent_run_id) FILTER (WHERE x.parent_run_id IS NOT NULL)
          INTO v_failed, v_tenants, v_kinds, v_spawned, v_parents
          FROM expired AS x;
        PERFORM runq._family_ended(v_spawned, v_parents, v_now);
        -- An expired run that was admitted leaves its slot to the next.
        PERFORM runq._slot_left(k.tenant_id, k.kind)
           FROM unnest(v_tenants, v_kinds) AS k (tenant_id, kind)
          WHERE EXISTS (SELECT FROM runq.limit_settings);
        PERFORM runq._notify_watchers(v_failed);
        RETURN QUERY SELECT x.run_id, 'expired'::text FROM unnest(v_failed) AS x (run_id);
    END IF;

    -- What the admissions of the moment could not do: a run now due under a
    -- limit, a slot freed while its key's lock was busy. Busy keys are only
    -- tried: the next sweep comes soon.
    PERFORM runq._rebalance(false);

    -- The watches of sessions that ended (runq.watch): a run nobody watches
    -- any more stops notifying. Nothing to forget: one scan of an empty
    -- table.
    PERFORM runq._forget_watches();
END
$$;

REVOKE ALL ON FUNCTION runq.sweep(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.sweep(integer) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.sweep(integer) IS
$c$Decide up to max_runs runs whose lease expired, fail runs past their deadline, and fail queued runs past their queue_ttl; safe to run from many processes at once. For each expired lease, in order: cancel requested -> cancelled; past its deadline -> failed, deadline_exceeded; attempts >= max_attempts -> failed, max_attempts_exceeded (dead_lettered); policy fail -> failed, orphaned; policy zero_work -> requeued at once if the run did no turn and no tool call and is inside its queue_ttl, else orphaned; policy resume -> requeued after least(backoff_cap, backoff_base * 2^(attempts-1)). Tool calls left started become retryable or uncertain. Then every other queued, running, waiting_for_user or waiting_for_children run past its deadline fails with deadline_exceeded (a running one with a cancel flag is cancelled). Also admits queued runs a concurrency limit held back that may now run (one now due, a slot freed while its key was busy), and forgets the watches (runq.watch) of sessions that ended. A run that ends here cancels its children not yet terminal (reason parent_finished), and a child that ends here may queue its parent again (run.children_done). Returns (run_id, action): requeued, dead_lettered, orphaned, cancelled, deadline_exceeded or expired.
Raises 22023 (max_runs NULL or below 1).$c$;

COMMIT;
