-- Deploy runq:function__cancel_children to pg
-- requires: columns_runs_parent
-- requires: table_spawns
-- requires: function__notify_watchers

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Children serve their parent (docs/contract.md "Child runs"): called in the
-- transaction that gave these runs a terminal status, by the functions that
-- end runs, and only for runs that spawned (runs.spawned). Each live child is
-- cancelled as runq.cancel cancels a run: a queued or waiting one at once,
-- and so, level by level, its own children; a running one by its cancel
-- flag, so that it ends at its worker's next call and its children follow
-- then. The reason, in each event's payload, is parent_finished.
--
-- Lock order: a run before its children. The run that ended is locked by
-- the caller; each level of children is locked by the statements that
-- cancel it, before the next level. Every function that locks a run and a
-- child of it keeps that order: a child that ends locks its parent first
-- (runq.complete), so that it can count its parent down (runq._wake_parents)
-- without waiting for it while holding itself.
CREATE FUNCTION runq._cancel_children(parents bigint[], at timestamptz)
    RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parents   bigint[] := _cancel_children.parents;
    v_cancelled bigint[];
    v_tenants   text[];
    v_kinds     text[];
BEGIN
    WHILE cardinality(v_parents) > 0 LOOP
        -- One statement for both, so that a child claimed meanwhile (queued
        -- when this statement started, running once its lock is granted) is
        -- re-read and flagged: a running child gets the flag, as runq.cancel
        -- sets it; a queued or waiting one is cancelled now.
        WITH ended AS (
            UPDATE runq.runs AS r
               SET status = CASE WHEN r.status = 'running' THEN r.status ELSE 'cancelled' END,
                   cancel_requested = r.cancel_requested OR r.status = 'running',
                   question = CASE WHEN r.status = 'running' THEN r.question END,
                   waiting_on = CASE WHEN r.status = 'running' THEN r.waiting_on END,
                   finished_at = CASE WHEN r.status = 'running' THEN r.finished_at ELSE at END,
                   updated_at = at
              FROM runq.runs AS o
             WHERE r.run_id = ANY (ARRAY(SELECT s.run_id FROM runq.spawns AS s
                                         WHERE s.parent_run_id = ANY (v_parents)))
               AND o.run_id = r.run_id
               AND r.status IN ('queued', 'waiting_for_user', 'waiting_for_children', 'running')
               AND NOT (r.status = 'running' AND r.cancel_requested)
            RETURNING r.run_id, r.lease_epoch, r.status, r.spawned, r.tenant_id, r.kind,
                      o.status AS previous_status, o.parked
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT e.run_id, e.lease_epoch,
                   CASE WHEN e.status = 'cancelled' THEN 'run.cancelled' ELSE 'run.cancel_requested' END,
                   CASE WHEN e.status = 'cancelled'
                        THEN jsonb_build_object('reason', 'parent_finished',
                                                'previous_status', e.previous_status)
                        ELSE jsonb_build_object('reason', 'parent_finished') END,
                   at
              FROM ended AS e
        )
        SELECT coalesce(array_agg(e.run_id ORDER BY e.run_id) FILTER (WHERE e.status = 'cancelled'), '{}'),
               coalesce(array_agg(e.run_id ORDER BY e.run_id)
                            FILTER (WHERE e.status = 'cancelled' AND e.spawned IS NOT NULL), '{}'),
               -- the keys of the admitted queued ones: they leave a slot
               coalesce(array_agg(e.tenant_id::text)
                            FILTER (WHERE e.status = 'cancelled' AND e.previous_status = 'queued'
                                      AND NOT e.parked), '{}'),
               coalesce(array_agg(e.kind::text)
                            FILTER (WHERE e.status = 'cancelled' AND e.previous_status = 'queued'
                                      AND NOT e.parked), '{}')
          INTO v_cancelled, v_parents, v_tenants, v_kinds
          FROM ended AS e;
        PERFORM runq._slot_left(k.tenant_id, k.kind)
           FROM unnest(v_tenants, v_kinds) AS k (tenant_id, kind)
          WHERE EXISTS (SELECT FROM runq.limit_settings);
        PERFORM runq._notify_watchers(v_cancelled);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION runq._cancel_children(bigint[], timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._cancel_children(bigint[], timestamptz) IS
    'Internal: cancels the live children of runs that just ended (reason parent_finished): queued and waiting ones, and their own children, at once; running ones by their cancel flag.';

COMMIT;
