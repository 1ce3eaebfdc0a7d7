-- Deploy runq:function_ask_user to pg
-- requires: table_runs
-- requires: table_run_events
-- requires: admission
-- requires: columns_runs_deadline
-- requires: function__refuse
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers. The run waits for the user: its lease ends, and it keeps
-- its session's one active slot, so the user's answer (a submit to that
-- session, or runq.deliver_input) resumes this run rather than starting one.
-- Raises 22023 (NULL question), RQ003; false when fenced or cancelled.
--
-- Its arguments are checked by the shared checks of argument_checks.
--
-- A run that leaves its slot hands it on when a concurrency limit is set
-- (runq._slot_left, deploy/admission.sql). Past the run's deadline it fails
-- the run instead (runq._refuse).
CREATE OR REPLACE FUNCTION runq.ask_user(run_id bigint, epoch bigint, question jsonb)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_done  boolean;
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs them as one expression; a PERFORM
    -- would run them as a statement of its own.
    IF runq._check_jsonb('question', ask_user.question) THEN
    END IF;

    WITH asked AS (
        UPDATE runq.runs AS r
           SET status = 'waiting_for_user', question = ask_user.question,
               lease_expires_at = NULL, updated_at = v_now
         WHERE r.run_id = ask_user.run_id
           AND r.status = 'running' AND r.lease_epoch = ask_user.epoch  -- fence
           AND NOT r.cancel_requested
           AND (r.deadline IS NULL OR r.deadline > v_now)  -- else runq._refuse fails it
        RETURNING r.run_id, r.lease_epoch, r.tenant_id, r.kind
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT a.run_id, a.lease_epoch, 'run.waiting_for_user',
               jsonb_build_object('question', ask_user.question), v_now
          FROM asked AS a
    )
    -- The run's slot is handed on when a limit is set (runq._slot_left).
    SELECT true INTO v_done
      FROM asked AS a
     WHERE NOT EXISTS (SELECT FROM runq.limit_settings) OR runq._slot_left(a.tenant_id, a.kind);
    IF v_done THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(ask_user.run_id, ask_user.epoch, 'ask_user', true);
END
$$;

REVOKE ALL ON FUNCTION runq.ask_user(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.ask_user(bigint, bigint, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.ask_user(bigint, bigint, jsonb) IS
$c$Put a run this worker holds under epoch into waiting_for_user with a question. The lease ends; the run keeps its session's active slot until input is delivered (runq.submit to the session, or runq.deliver_input). Returns true, or false when fenced, when cancel was requested (the run becomes cancelled) or past the run's deadline (the run becomes failed, deadline_exceeded).
Raises 22023 (NULL run_id, epoch or question), RQ003 (no such run).$c$;

COMMIT;
