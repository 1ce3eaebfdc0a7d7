-- Revert runq:function__refuse from pg
-- (back to _refuse as v0.1.3 released it)
-- requires: table_runs
-- requires: index_run_events_fenced
-- requires: function__resolve_tool_calls
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The slow path of every worker write whose fenced statement matched no row.
-- Why it matched nothing decides the answer:
--   * no such run                      -> RQ003 (only a run that exists can fence);
--   * ours, but cancel was requested   -> the run becomes cancelled now, in this
--     (when the write honours cancel)     statement's transaction; false;
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
BEGIN
    -- A NULL id or epoch matched nothing in the caller's fence; say why here,
    -- off the hot path.
    IF _refuse.epoch IS NULL THEN
        PERFORM runq._bad_argument('epoch', 'given', _refuse.epoch);
    END IF;
    SELECT r.status::text, r.lease_epoch::bigint, r.cancel_requested
      INTO v_status, v_epoch, v_cancel
      FROM runq.runs AS r
     WHERE r.run_id = _refuse.run_id;
    IF NOT FOUND THEN
        PERFORM runq._run_not_found(_refuse.run_id);
    END IF;

    IF honours_cancel AND v_cancel AND v_status = 'running' AND v_epoch = _refuse.epoch THEN
        WITH cancelled AS (
            UPDATE runq.runs AS r
               SET status = 'cancelled', lease_expires_at = NULL,
                   finished_at = v_now, updated_at = v_now
             WHERE r.run_id = _refuse.run_id
               AND r.status = 'running' AND r.lease_epoch = _refuse.epoch  -- fence
               AND r.cancel_requested
            RETURNING r.run_id, r.lease_epoch
        )
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT c.run_id, c.lease_epoch, 'run.cancelled',
               jsonb_build_object('reason', 'cancel_requested', 'observed_by', operation), v_now
          FROM cancelled AS c;
        IF FOUND THEN
            PERFORM runq._resolve_tool_calls(ARRAY[_refuse.run_id], v_now);
            RETURN false;
        END IF;
    END IF;

    -- Running under the very epoch the fence missed: that epoch was issued
    -- after the fence ran (a forged epoch a claim has just reached), so it was
    -- one the run never had then. Its worker's own fencing, later, logs it.
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
    'Internal: answers a worker write that its fence refused: 22023 (NULL run_id or epoch), RQ003, cancellation, one run.fenced event for a stale epoch, or nothing for an epoch the run never had.';

COMMIT;
