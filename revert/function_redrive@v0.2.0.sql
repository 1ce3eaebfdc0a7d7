-- Revert runq:function_redrive from pg
-- (back to redrive as v0.1.3 released it)
-- requires: table_runs
-- requires: table_run_events
-- requires: index_runs_session_active
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators to take a run out of the dead letter. Locks the run.
-- The session rule still holds: the partial unique index refuses the requeue
-- when the session has another active run, and that becomes RQ002.
-- Raises RQ002, RQ003, RQ004 (not failed).
--
-- A NULL or missing run is reported by runq._run_not_found, which every
-- function that looks a run up shares.
CREATE OR REPLACE FUNCTION runq.redrive(run_id bigint, reason text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_status   text;
    v_tenant   text;
    v_session  text;
    v_failure  jsonb;
    v_active   bigint;
BEGIN
    SELECT r.status::text, r.tenant_id::text, r.session_id::text, r.failure::jsonb
      INTO v_status, v_tenant, v_session, v_failure
      FROM runq.runs AS r
     WHERE r.run_id = redrive.run_id
       FOR UPDATE;
    IF NOT FOUND THEN
        -- A NULL run_id matches nothing, and is reported here.
        PERFORM runq._run_not_found(redrive.run_id);
    ELSIF v_status <> 'failed' THEN
        RAISE EXCEPTION USING ERRCODE = 'RQ004',
            MESSAGE = format('run %s is %s, not failed', redrive.run_id, v_status),
            HINT = 'Only a run in the dead letter can be redriven.';
    END IF;

    BEGIN
        UPDATE runq.runs AS r
           SET status = 'queued', attempts = 0, failure = NULL, finished_at = NULL,
               scheduled_for = NULL, cancel_requested = false, updated_at = v_now,
               -- a fresh queue_ttl window, or a run that expired would expire again
               expires_at = v_now + r.queue_ttl
         WHERE r.run_id = redrive.run_id;
    EXCEPTION WHEN unique_violation THEN
        SELECT r.run_id INTO v_active
          FROM runq.runs AS r
         WHERE r.tenant_id = v_tenant AND r.session_id = v_session
           AND r.status IN ('queued', 'running', 'waiting_for_user');
        RAISE EXCEPTION USING ERRCODE = 'RQ002',
            MESSAGE = format('session %s of tenant %s already has active run %s',
                             v_session, v_tenant, v_active),
            DETAIL = format('Run %s holds the session''s one active slot.', v_active),
            HINT = 'Redrive once that run has finished.';
    END;

    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT r.run_id, r.lease_epoch, 'run.redriven',
           jsonb_strip_nulls(jsonb_build_object('reason', redrive.reason,
                                                'previous_failure', v_failure)),
           v_now
      FROM runq.runs AS r
     WHERE r.run_id = redrive.run_id;
    PERFORM pg_notify('runq', '');
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.redrive(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.redrive(bigint, text) TO runq_admin;

COMMENT ON FUNCTION runq.redrive(bigint, text) IS
$c$Take a failed run out of the dead letter: it is queued again, claimable at once, with its attempts reset, a fresh queue_ttl window and its failure cleared (the failure stays in its run.failed and run.redriven events). Returns true.
Raises 22023 (NULL run_id), RQ002 (its session has another active run), RQ003 (no such run), RQ004 (the run is not failed).$c$;

COMMIT;
