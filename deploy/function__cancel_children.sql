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
-- Lock order: every live descendant is locked before any is written,
-- deepest first. A child that ends locks its parent when the parent waits
-- for its children (runq._wake_parents): child, then parent. Taking them
-- the other way round here would deadlock with it. runq._lock_descendants
-- is also what runq.cancel and runq.sweep call before they lock a waiting
-- parent itself.
CREATE FUNCTION runq._lock_descendants(run_ids bigint[])
    RETURNS void
    LANGUAGE sql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
    -- A parent's children through its keys (runq.spawns): no index of runs
    -- is kept for them, so no claim or complete of any run pays for one.
    WITH RECURSIVE down (run_id, depth) AS (
        SELECT s.run_id, 1
          FROM runq.spawns AS s
         WHERE s.parent_run_id = ANY (_lock_descendants.run_ids)
        UNION ALL
        SELECT s.run_id, down.depth + 1
          FROM down
          JOIN runq.runs AS c ON c.run_id = down.run_id AND c.spawned IS NOT NULL
          JOIN runq.spawns AS s ON s.parent_run_id = down.run_id
    )
    SELECT
      FROM runq.runs AS r
      JOIN down ON down.run_id = r.run_id
     WHERE r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children')
     ORDER BY down.depth DESC, r.run_id
       FOR NO KEY UPDATE OF r;
$$;

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
    PERFORM runq._lock_descendants(v_parents);
    WHILE cardinality(v_parents) > 0 LOOP
        -- Running children: the flag, as runq.cancel sets it.
        WITH flagged AS (
            UPDATE runq.runs AS r
               SET cancel_requested = true, updated_at = at
             WHERE r.run_id = ANY (ARRAY(SELECT s.run_id FROM runq.spawns AS s
                                         WHERE s.parent_run_id = ANY (v_parents)))
               AND r.status = 'running' AND NOT r.cancel_requested
            RETURNING r.run_id, r.lease_epoch
        )
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT f.run_id, f.lease_epoch, 'run.cancel_requested',
               jsonb_build_object('reason', 'parent_finished'), at
          FROM flagged AS f;

        -- Queued and waiting children: cancelled now. They are locked
        -- (above), so the self-join's snapshot shows the status replaced.
        WITH cancelled AS (
            UPDATE runq.runs AS r
               SET status = 'cancelled', question = NULL, waiting_on = NULL, finished_at = at, updated_at = at
              FROM runq.runs AS o
             WHERE r.run_id = ANY (ARRAY(SELECT s.run_id FROM runq.spawns AS s
                                         WHERE s.parent_run_id = ANY (v_parents)))
               AND o.run_id = r.run_id
               AND r.status IN ('queued', 'waiting_for_user', 'waiting_for_children')
            RETURNING r.run_id, r.lease_epoch, r.spawned, r.tenant_id, r.kind,
                      o.status AS previous_status, o.parked
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT c.run_id, c.lease_epoch, 'run.cancelled',
                   jsonb_build_object('reason', 'parent_finished',
                                      'previous_status', c.previous_status), at
              FROM cancelled AS c
        )
        SELECT coalesce(array_agg(c.run_id ORDER BY c.run_id), '{}'),
               coalesce(array_agg(c.run_id ORDER BY c.run_id) FILTER (WHERE c.spawned IS NOT NULL), '{}'),
               -- the keys of the admitted queued ones: they leave a slot
               coalesce(array_agg(c.tenant_id::text) FILTER (WHERE c.previous_status = 'queued' AND NOT c.parked), '{}'),
               coalesce(array_agg(c.kind::text) FILTER (WHERE c.previous_status = 'queued' AND NOT c.parked), '{}')
          INTO v_cancelled, v_parents, v_tenants, v_kinds
          FROM cancelled AS c;
        PERFORM runq._slot_left(k.tenant_id, k.kind)
           FROM unnest(v_tenants, v_kinds) AS k (tenant_id, kind)
          WHERE EXISTS (SELECT FROM runq.limit_settings);
        PERFORM runq._notify_watchers(v_cancelled);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION runq._lock_descendants(bigint[]), runq._cancel_children(bigint[], timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._lock_descendants(bigint[]) IS
    'Internal: locks (FOR NO KEY UPDATE) the live descendants of these runs, deepest first: the lock order of the functions that end a parent.';
COMMENT ON FUNCTION runq._cancel_children(bigint[], timestamptz) IS
    'Internal: cancels the live children of runs that just ended (reason parent_finished): queued and waiting ones, and their own children, at once; running ones by their cancel flag.';

COMMIT;
