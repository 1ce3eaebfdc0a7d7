-- Deploy runq:function_wait_children to pg
-- requires: function__wake_parents
-- requires: table_spawns
-- requires: function__refuse
-- requires: admission
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers, like runq.ask_user: the run waits for its children
-- (docs/contract.md "Child runs"), its lease ended; it holds no worker and no
-- slot of a limit, and keeps its session. The last child to end queues it
-- again (runq._wake_parents). With no child left that is not terminal, it is
-- queued at once instead, its attempts kept, so that a handler that loops on
-- an empty wait still meets max_attempts.
--
-- The count (runs.waiting_on) is of the children not yet terminal, each
-- locked FOR SHARE while it is counted: a child ending now has looked at the
-- parent before this commits, seen it running and left it, so this waits for
-- its end and does not count it; one not ending now cannot end before this
-- commits, and when it ends it sees the parent waiting and counts down
-- (runq._wake_parents). The run is locked before its children, as every
-- function that locks both does (runq.complete says why).
CREATE FUNCTION runq.wait_children(run_id bigint, epoch bigint)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_run   record;
    v_live  bigint;
BEGIN
    SELECT r.tenant_id, r.kind, r.watched, r.lease_epoch
      INTO v_run
      FROM runq.runs AS r
     WHERE r.run_id = wait_children.run_id
       AND r.status = 'running' AND r.lease_epoch = wait_children.epoch  -- fence
       AND NOT r.cancel_requested
       AND (r.deadline IS NULL OR r.deadline > v_now)  -- else runq._refuse fails it
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN runq._refuse(wait_children.run_id, wait_children.epoch, 'wait_children', true);
    END IF;

    SELECT count(*) INTO v_live
      FROM (SELECT
              FROM runq.runs AS c
             WHERE c.run_id = ANY (ARRAY(SELECT s.run_id FROM runq.spawns AS s
                                          WHERE s.parent_run_id = wait_children.run_id))
               AND c.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children')
             ORDER BY c.run_id
               FOR SHARE) AS c;

    IF v_live = 0 THEN
        -- Nothing to wait for: back to the queue now, keeping its slot as a
        -- run back from running does (runq._requeued).
        UPDATE runq.runs AS r
           SET status = 'queued', lease_expires_at = NULL, updated_at = v_now
         WHERE r.run_id = wait_children.run_id;
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        VALUES (wait_children.run_id, v_run.lease_epoch, 'run.children_done', '{}', v_now);
        PERFORM runq._requeued(wait_children.run_id, true);
        PERFORM pg_notify('runq', '');
        RETURN true;
    END IF;

    UPDATE runq.runs AS r
       SET status = 'waiting_for_children', waiting_on = v_live, lease_expires_at = NULL,
           updated_at = v_now
     WHERE r.run_id = wait_children.run_id;
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    VALUES (wait_children.run_id, v_run.lease_epoch, 'run.waiting_for_children',
            jsonb_build_object('children', v_live), v_now);
    -- A watched run notifies its watchers; the slot it leaves is handed on
    -- when a limit is set (runq._slot_left), as runq.ask_user does.
    IF v_run.watched THEN
        PERFORM runq._notify_watchers(ARRAY[wait_children.run_id]);
    END IF;
    IF EXISTS (SELECT FROM runq.limit_settings) THEN
        PERFORM runq._slot_left(v_run.tenant_id, v_run.kind);
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.wait_children(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.wait_children(bigint, bigint) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.wait_children(bigint, bigint) IS
$c$Put a run this worker holds under epoch into waiting_for_children: the lease ends, and the run holds no worker and no concurrency slot, and keeps its session. When its last child that is not terminal ends, the run is queued again in that transaction (run.children_done, attempts reset) and its next claim is a resumed one (read runq.children). With no such child it is queued at once (run.children_done), its attempts kept. Returns true, or false when fenced, when cancel was requested (the run becomes cancelled) or past the run's deadline (it becomes failed, deadline_exceeded).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
