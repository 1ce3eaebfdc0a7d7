-- Deploy runq:function__refuse to pg
-- requires: function__wake_parents
-- requires: table_runs
-- requires: index_run_events_fenced
-- requires: function__resolve_tool_calls
-- requires: argument_checks
-- requires: admission
-- requires: stop_failures
-- requires: function__notify_watchers

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The slow path of every worker write whose fenced statement matched no row.
-- Why it matched nothing decides the answer:
--   * no such run                      -> RQ003 (only a run that exists can fence);
--   * ours, but cancel was requested   -> the run becomes cancelled now, in this
--     (when the write honours cancel)     statement's transaction; false;
--   * ours, past its deadline, or at   -> the run becomes failed now (deadline_exceeded,
--     its budget (begin_turn only)        budget_exhausted), in this transaction; false;
--     (when the write honours cancel)
--   * an epoch the run never had (negative, or above its lease_epoch: no
--     claim has issued it yet) -> false and no event: a run.fenced there
--     would come before that epoch's run.claimed, and would take the place
--     (ON CONFLICT) of the real fencing of that epoch's worker later;
--   * anything else (an older epoch, or not running) -> one run.fenced per run
--     and stale epoch; false. The run itself is not touched.
-- Epochs only grow and a run never returns to 'running' under an old epoch, so
-- the state read here cannot turn back into a match.
--
-- A negative epoch could not be logged anyway: runq.epoch's check on the
-- event would raise 23514.
--
-- A NULL or missing run is reported by runq._run_not_found, a NULL epoch by
-- runq._bad_argument.
--
-- A run it cancels hands its slot on when a concurrency limit is set
-- (runq._slot_left, deploy/admission.sql).
CREATE OR REPLACE FUNCTION runq._refuse(run_id bigint, epoch bigint, operation text, honours_cancel boolean)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_status  text;
    v_epoch   bigint;
    v_cancel  boolean;
    v_failure jsonb;
    v_parent  bigint;
    v_spawned boolean;
    v_family  boolean;
BEGIN
    -- A NULL id or epoch matched nothing in the caller's fence; say why here,
    -- off the hot path.
    IF _refuse.epoch IS NULL THEN
        PERFORM runq._bad_argument('epoch', 'given', _refuse.epoch);
    END IF;
    SELECT r.status::text, r.lease_epoch::bigint, r.parent_run_id IS NOT NULL
      INTO v_status, v_epoch, v_family
      FROM runq.runs AS r
     WHERE r.run_id = _refuse.run_id;
    IF NOT FOUND THEN
        PERFORM runq._run_not_found(_refuse.run_id);
    END IF;

    -- Ours, and stopped by a cancel flag, the deadline or (begin_turn only)
    -- the budget, in that order (runq._stop_failure): decided under the row
    -- lock, so that a cancel or a set_budget committed since the caller's
    -- fenced statement is seen, and the run ends in this transaction.
    IF honours_cancel AND v_status = 'running' AND v_epoch = _refuse.epoch THEN
        -- A child run may end here: its parent is locked first (the lock
        -- order: runq.complete says why).
        IF v_family THEN
            PERFORM runq._lock_parents(ARRAY[_refuse.run_id]);
        END IF;
        SELECT r.cancel_requested, runq._stop_failure(r, operation = 'begin_turn', v_now)
          INTO v_cancel, v_failure
          FROM runq.runs AS r
         WHERE r.run_id = _refuse.run_id
           AND r.status = 'running' AND r.lease_epoch = _refuse.epoch  -- fence
           FOR UPDATE;
        IF v_cancel OR v_failure IS NOT NULL THEN
            WITH stopped AS (
                UPDATE runq.runs AS r
                   SET status = CASE WHEN v_cancel THEN 'cancelled' ELSE 'failed' END,
                       failure = CASE WHEN v_cancel THEN NULL ELSE v_failure END,
                       lease_expires_at = NULL, finished_at = v_now, updated_at = v_now
                 WHERE r.run_id = _refuse.run_id
                RETURNING r.run_id, r.lease_epoch, r.parent_run_id, r.spawned
            ), logged AS (
                INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
                SELECT s.run_id, s.lease_epoch,
                       CASE WHEN v_cancel THEN 'run.cancelled' ELSE 'run.failed' END,
                       CASE WHEN v_cancel
                            THEN jsonb_build_object('reason', 'cancel_requested', 'observed_by', operation)
                            ELSE v_failure END,
                       v_now
                  FROM stopped AS s
            )
            SELECT s.parent_run_id, s.spawned IS NOT NULL INTO v_parent, v_spawned
              FROM stopped AS s;
            PERFORM runq._resolve_tool_calls(ARRAY[_refuse.run_id], v_now);
            PERFORM runq._notify_watchers(ARRAY[_refuse.run_id]);
            PERFORM runq._slot_left(r.tenant_id, r.kind)
               FROM runq.runs AS r
              WHERE r.run_id = _refuse.run_id AND EXISTS (SELECT FROM runq.limit_settings);
            -- Its live children are cancelled; a parent waiting for it may be
            -- done waiting.
            IF v_spawned OR v_parent IS NOT NULL THEN
                PERFORM runq._family_ended(CASE WHEN v_spawned THEN ARRAY[_refuse.run_id] END,
                                           CASE WHEN v_parent IS NOT NULL THEN ARRAY[v_parent] END, v_now);
            END IF;
            RETURN false;
        END IF;
    END IF;

    IF _refuse.epoch NOT BETWEEN 0 AND v_epoch
       OR (v_status = 'running' AND v_epoch = _refuse.epoch) THEN
        RETURN false;
    END IF;
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    VALUES (_refuse.run_id, _refuse.epoch, 'run.fenced',
            jsonb_build_object('operation', operation, 'current_epoch', v_epoch,
                               'status', v_status),
            v_now)
    ON CONFLICT (run_id, epoch) WHERE type = 'run.fenced' DO NOTHING;
    RETURN false;
END
$$;

REVOKE ALL ON FUNCTION runq._refuse(bigint, bigint, text, boolean) FROM PUBLIC;

COMMENT ON FUNCTION runq._refuse(bigint, bigint, text, boolean) IS
    'Internal: answers a worker write that its fence refused: 22023 (NULL run_id or epoch), RQ003, cancellation, a failure past the deadline or (begin_turn) at the budget, one run.fenced event for a stale epoch, or nothing for an epoch the run never had.';

COMMIT;
