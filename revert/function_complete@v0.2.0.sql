-- Revert runq:function_complete from pg
-- (back to complete as v0.1.3 released it, with the comment comments_raises gave it)
-- requires: table_runs
-- requires: table_run_events
-- requires: function__refuse
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

-- Called by workers. One statement: the fenced update to 'succeeded' and its
-- event. Applies even when cancel was requested: the work is done, and the
-- log should say so. Raises RQ003; returns false when fenced.
CREATE OR REPLACE FUNCTION runq.complete(run_id bigint, epoch bigint, result jsonb DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    WITH done AS (
        UPDATE runq.runs AS r
           SET status = 'succeeded', result = complete.result,
               lease_expires_at = NULL, finished_at = v_now, updated_at = v_now
         WHERE r.run_id = complete.run_id
           AND r.status = 'running' AND r.lease_epoch = complete.epoch  -- fence
        RETURNING r.run_id, r.lease_epoch
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now
      FROM done AS d;
    IF FOUND THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(complete.run_id, complete.epoch, 'complete', false);
END
$$;

REVOKE ALL ON FUNCTION runq.complete(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.complete(bigint, bigint, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.complete(bigint, bigint, jsonb) IS
$c$Mark a run this worker holds under epoch succeeded, with an optional result. Returns true, or false when fenced (the run is no longer running under this epoch; nothing changes but one run.fenced event).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
