-- Deploy runq:function_redrive to pg
-- requires: function_redrive@v0.2.0
-- requires: columns_runs_parent
-- requires: function__wake_parents

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators to take a run out of the dead letter. Locks the run.
-- The session rule still holds: the partial unique index refuses the requeue
-- when the session has another active run, and that becomes RQ002.
-- Raises RQ002, RQ003, RQ004 (not failed; a child of a terminal parent).
--
-- A NULL or missing run is reported by runq._run_not_found, which every
-- function that looks a run up shares.
--
-- The run is admitted or parked when limits or pauses are set
-- (runq._requeued, deploy/admission.sql); a run that failed
-- deadline_exceeded, or whose deadline has passed, gets a fresh window.
--
-- A run a schedule created is refused while that
-- schedule has another non-terminal run, by runs_schedule_active_key as the
-- session's run is by runs_session_active_key; the unique violation names
-- its index, and the RQ002 names the schedule and its live run.
--
-- A child run (runq.spawn) serves its parent: redriven only while the parent
-- is not terminal (RQ004 naming it; a purged parent was terminal). The parent
-- is locked, so that a parent ending now either ends first (and this raises)
-- or waits for this commit, and then finds the child live and cancels it; a
-- parent waiting for its children waits for this one again
-- (runs.waiting_on). The child's fresh deadline is no later than the
-- parent's.
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
    v_schedule text;
    v_active   bigint;
    v_index    text;
    v_parent   bigint;
    v_pstatus  text;
    v_pdead    timestamptz;
BEGIN
    -- A child's parent is locked before the child (the lock order: runq.complete
    -- says why); parent_run_id never changes, so it is read unlocked.
    PERFORM runq._lock_parents(ARRAY[redrive.run_id]);
    SELECT r.status::text, r.tenant_id::text, r.session_id::text, r.failure::jsonb, r.schedule,
           r.parent_run_id
      INTO v_status, v_tenant, v_session, v_failure, v_schedule, v_parent
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
    IF v_parent IS NOT NULL THEN
        SELECT p.status::text, p.deadline INTO v_pstatus, v_pdead
          FROM runq.runs AS p
         WHERE p.run_id = v_parent
           FOR NO KEY UPDATE;
        IF v_pstatus IS NULL OR v_pstatus IN ('succeeded', 'failed', 'cancelled') THEN
            RAISE EXCEPTION USING ERRCODE = 'RQ004',
                MESSAGE = format('run %s is a child of run %s, which is %s', redrive.run_id, v_parent,
                                 coalesce(v_pstatus, 'purged')),
                HINT = 'A child serves its parent: redrive the parent, which spawns its children again under new keys.';
        END IF;
    END IF;

    BEGIN
        UPDATE runq.runs AS r
           SET status = 'queued', attempts = 0, failure = NULL, finished_at = NULL,
               scheduled_for = NULL, cancel_requested = false, updated_at = v_now,
               -- a fresh queue_ttl window, or a run that expired would expire again
               expires_at = v_now + r.queue_ttl,
               -- missed its deadline, or its deadline has passed since: a fresh
               -- window (else the next sweep would fail it again at once)
               -- (a child's no later than its parent's)
               deadline = CASE WHEN r.failure ->> 'code' = 'deadline_exceeded' OR r.deadline <= v_now
                               THEN least(v_now + r.timeout, v_pdead) ELSE r.deadline END
         WHERE r.run_id = redrive.run_id;
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS v_index = CONSTRAINT_NAME;
        IF v_index = 'runs_schedule_active_key' THEN
            SELECT r.run_id INTO v_active
              FROM runq.runs AS r
             WHERE r.schedule = v_schedule
               AND r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children');
            RAISE EXCEPTION USING ERRCODE = 'RQ002',
                MESSAGE = format('schedule %s already has active run %s', v_schedule, v_active),
                DETAIL = format('Run %s holds the schedule''s one non-terminal run.', v_active),
                HINT = 'Redrive once that run has finished.';
        END IF;
        SELECT r.run_id INTO v_active
          FROM runq.runs AS r
         WHERE r.tenant_id = v_tenant AND r.session_id = v_session
           AND r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children');
        RAISE EXCEPTION USING ERRCODE = 'RQ002',
            MESSAGE = format('session %s of tenant %s already has active run %s',
                             v_session, v_tenant, v_active),
            DETAIL = format('Run %s holds the session''s one active slot.', v_active),
            HINT = 'Redrive once that run has finished.';
    END;

    IF v_pstatus = 'waiting_for_children' THEN
        UPDATE runq.runs AS p
           SET waiting_on = p.waiting_on + 1, updated_at = v_now
         WHERE p.run_id = v_parent;
    END IF;
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT r.run_id, r.lease_epoch, 'run.redriven',
           jsonb_strip_nulls(jsonb_build_object('reason', redrive.reason,
                                                'previous_failure', v_failure)),
           v_now
      FROM runq.runs AS r
     WHERE r.run_id = redrive.run_id;
    -- Back in the queue from the dead letter, it needs admitting when limits
    -- or pauses are set (deploy/admission.sql).
    PERFORM runq._requeued(redrive.run_id, false);
    PERFORM pg_notify('runq', '');
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.redrive(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.redrive(bigint, text) TO runq_admin;

COMMENT ON FUNCTION runq.redrive(bigint, text) IS
$c$Take a failed run out of the dead letter: it is queued again, claimable at once, with its attempts reset, a fresh queue_ttl window (and, if it failed deadline_exceeded or its deadline has passed, a fresh deadline: now + its timeout; its usage totals stay) and its failure cleared (the failure stays in its run.failed and run.redriven events). Returns true.
Raises 22023 (NULL run_id), RQ002 (its session, or the schedule that created it, has another active run), RQ003 (no such run), RQ004 (the run is not failed, or it is a child run whose parent is terminal).$c$;

COMMIT;
