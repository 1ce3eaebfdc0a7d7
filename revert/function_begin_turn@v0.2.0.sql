-- Revert runq:function_begin_turn from pg
-- (back to begin_turn as v0.1.3 released it)
-- requires: table_runs
-- requires: table_run_events
-- requires: function__refuse
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

-- Called by workers before every chargeable model call. The counter is what
-- the zero_work recovery policy reads: a run that began a turn may have
-- charged someone and is never silently run again.
-- Raises RQ003; false when fenced or cancelled.
CREATE OR REPLACE FUNCTION runq.begin_turn(run_id bigint, epoch bigint)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    WITH counted AS (
        UPDATE runq.runs AS r
           SET turns = r.turns + 1, updated_at = v_now
         WHERE r.run_id = begin_turn.run_id
           AND r.status = 'running' AND r.lease_epoch = begin_turn.epoch  -- fence
           AND NOT r.cancel_requested
        RETURNING r.run_id, r.lease_epoch, r.turns
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT c.run_id, c.lease_epoch, 'run.turn_started',
           jsonb_build_object('turn', c.turns), v_now
      FROM counted AS c;
    IF FOUND THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(begin_turn.run_id, begin_turn.epoch, 'begin_turn', true);
END
$$;

REVOKE ALL ON FUNCTION runq.begin_turn(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.begin_turn(bigint, bigint) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.begin_turn(bigint, bigint) IS
$c$Record, before a chargeable model call, that a run this worker holds under epoch starts a turn (the run's turn count grows; a run with a turn is never requeued under the zero_work policy). Returns true, or false when fenced or when cancel was requested (the run becomes cancelled).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
