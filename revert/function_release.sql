-- Revert runq:function_release from pg
-- (back to the version of v0.2.0)

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers shutting down gracefully. A lease expiry brought forward:
-- the run takes runq._expire_leases' path now, as released (the attempt is
-- given back, no backoff). The fence is the lock taken here.
-- Raises RQ003; false when fenced.
CREATE OR REPLACE FUNCTION runq.release(run_id bigint, epoch bigint)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM FROM runq.runs AS r
      WHERE r.run_id = release.run_id
        AND r.status = 'running' AND r.lease_epoch = release.epoch  -- fence
        FOR UPDATE;
    IF NOT FOUND THEN
        RETURN runq._refuse(release.run_id, release.epoch, 'release', false);
    END IF;
    PERFORM runq._expire_leases(ARRAY[release.run_id], true, clock_timestamp());
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.release(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.release(bigint, bigint) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.release(bigint, bigint) IS
$c$Give back the lease of a run this worker holds under epoch (graceful shutdown): the run takes the lease-expiry path of runq.sweep now, without using up the attempt and without backoff. A resume run is queued again at once; a fail run, or a zero_work run that did work, fails with code orphaned; a cancel-requested run is cancelled; a run past its deadline fails with code deadline_exceeded. Returns true, or false when fenced.
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
