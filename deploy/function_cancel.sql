-- Deploy runq:function_cancel to pg
-- requires: function__wake_parents
-- requires: table_runs
-- requires: table_run_events
-- requires: role_runq_client
-- requires: role_runq_admin
-- requires: argument_checks
-- requires: admission
-- requires: function__notify_watchers

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by submitters and operators. Locks the run. A queued or waiting run
-- is cancelled at once; a running one gets the durable cancel flag, which the
-- worker's next heartbeat (or other fenced write) turns into 'cancelled' — the
-- queue cannot interrupt a worker on another machine. Raises RQ003.
--
-- A NULL or missing run is reported by runq._run_not_found, which every
-- function that looks a run up shares.
--
-- An admitted queued run it cancels hands its slot on when a concurrency
-- limit is set (runq._slot_left, deploy/admission.sql).
CREATE OR REPLACE FUNCTION runq.cancel(run_id bigint, reason text DEFAULT NULL)
    RETURNS text
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_status  text;
    v_flagged boolean;
    v_epoch   bigint;
    v_parked  boolean;
    v_parent  bigint;
    v_spawned boolean;
BEGIN
    -- A child run: its parent is locked first (the lock order: runq.complete
    -- says why).
    IF (SELECT r.parent_run_id IS NOT NULL FROM runq.runs AS r WHERE r.run_id = cancel.run_id) THEN
        PERFORM runq._lock_parents(ARRAY[cancel.run_id]);
    END IF;
    SELECT r.status::text, r.cancel_requested, r.lease_epoch::bigint, r.parked,
           r.parent_run_id, r.spawned IS NOT NULL
      INTO v_status, v_flagged, v_epoch, v_parked, v_parent, v_spawned
      FROM runq.runs AS r
     WHERE r.run_id = cancel.run_id
       FOR UPDATE;
    IF NOT FOUND THEN
        -- A NULL run_id matches nothing, and is reported here.
        PERFORM runq._run_not_found(cancel.run_id);
    END IF;

    IF v_status IN ('queued', 'waiting_for_user', 'waiting_for_children') THEN
        UPDATE runq.runs AS r
           SET status = 'cancelled', question = NULL, waiting_on = NULL, finished_at = v_now,
               updated_at = v_now
         WHERE r.run_id = cancel.run_id;
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        VALUES (cancel.run_id, v_epoch, 'run.cancelled',
                jsonb_strip_nulls(jsonb_build_object('reason', cancel.reason,
                                                     'previous_status', v_status)),
                v_now);
        -- An admitted queued run leaves its slot (a waiting one holds none).
        PERFORM runq._slot_left(r.tenant_id, r.kind)
           FROM runq.runs AS r
          WHERE r.run_id = cancel.run_id AND v_status = 'queued' AND NOT v_parked
            AND EXISTS (SELECT FROM runq.limit_settings);
        PERFORM runq._notify_watchers(ARRAY[cancel.run_id]);
        -- Its live children are cancelled; a parent waiting for it may be
        -- done waiting.
        IF v_spawned OR v_parent IS NOT NULL THEN
            PERFORM runq._family_ended(CASE WHEN v_spawned THEN ARRAY[cancel.run_id] END,
                                       CASE WHEN v_parent IS NOT NULL THEN ARRAY[v_parent] END, v_now);
        END IF;
        RETURN 'cancelled';
    ELSIF v_status = 'running' THEN
        IF NOT v_flagged THEN
            UPDATE runq.runs AS r
               SET cancel_requested = true, updated_at = v_now
             WHERE r.run_id = cancel.run_id;
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            VALUES (cancel.run_id, v_epoch, 'run.cancel_requested',
                    jsonb_strip_nulls(jsonb_build_object('reason', cancel.reason)), v_now);
        END IF;
        RETURN 'cancel_requested';
    END IF;
    RETURN 'already_terminal';
END
$$;

REVOKE ALL ON FUNCTION runq.cancel(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.cancel(bigint, text) TO runq_client, runq_admin;

COMMENT ON FUNCTION runq.cancel(bigint, text) IS
$c$Cancel a run. Returns cancelled (it was queued, waiting_for_user or waiting_for_children; its children not yet terminal are cancelled with it, reason parent_finished), cancel_requested (it is running: the worker's next heartbeat returns false and the run becomes cancelled then) or already_terminal (nothing changed).
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
