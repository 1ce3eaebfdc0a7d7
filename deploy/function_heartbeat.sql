-- Deploy runq:function_heartbeat to pg
-- requires: table_runs
-- requires: function__refuse
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers every third of a lease. The hot path is one HOT update
-- of the run row (no indexed column changes) and no event. When the fence
-- refuses, runq._refuse answers: RQ003, cancellation (cancel was requested)
-- or run.fenced. Never raises for being fenced.
--
-- Past the run's deadline, the holder's call fails the run
-- (deadline_exceeded, through runq._refuse) and returns false.
CREATE OR REPLACE FUNCTION runq.heartbeat(run_id bigint, epoch bigint)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    UPDATE runq.runs AS r
       SET heartbeat_at = v_now,
           lease_expires_at = v_now + r.lease
     WHERE r.run_id = heartbeat.run_id
       AND r.status = 'running' AND r.lease_epoch = heartbeat.epoch  -- fence
       AND NOT r.cancel_requested
       AND (r.deadline IS NULL OR r.deadline > v_now);  -- else runq._refuse fails it
    IF FOUND THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(heartbeat.run_id, heartbeat.epoch, 'heartbeat', true);
END
$$;

REVOKE ALL ON FUNCTION runq.heartbeat(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.heartbeat(bigint, bigint) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.heartbeat(bigint, bigint) IS
$c$Extend the lease of a run this worker holds under epoch by the lease's length. Returns true, or false when the worker must stop: the run is no longer running under this epoch (fenced: one run.fenced event is logged) or cancel was requested (the run becomes cancelled now) or the run is past its deadline (it becomes failed now, deadline_exceeded).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
