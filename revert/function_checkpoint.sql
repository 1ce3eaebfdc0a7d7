-- Revert runq:function_checkpoint from pg
-- (back to checkpoint as v0.1.3 released it)
-- requires: table_runs
-- requires: table_run_events
-- requires: table_checkpoints
-- requires: function__refuse
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers at a tool-invocation boundary. One statement: the fenced
-- update points the run at the new checkpoint (a HOT update: last_checkpoint
-- is not indexed), stores the state and logs run.checkpointed.
-- Raises 22023 (NULL state), RQ003; false when fenced or cancelled.
--
-- Its arguments are checked by the shared checks of argument_checks.
CREATE OR REPLACE FUNCTION runq.checkpoint(run_id bigint, epoch bigint, state jsonb)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs them as one expression; a PERFORM
    -- would run them as a statement of its own.
    IF runq._check_jsonb('state', checkpoint.state) THEN
    END IF;

    WITH pointed AS (
        UPDATE runq.runs AS r
           SET last_checkpoint = nextval('runq.progress_seq'), updated_at = v_now
         WHERE r.run_id = checkpoint.run_id
           AND r.status = 'running' AND r.lease_epoch = checkpoint.epoch  -- fence
           AND NOT r.cancel_requested
        RETURNING r.run_id, r.lease_epoch, r.last_checkpoint
    ), stored AS (
        INSERT INTO runq.checkpoints (run_id, seq, epoch, created_at, state)
        SELECT p.run_id, p.last_checkpoint, p.lease_epoch, v_now, checkpoint.state
          FROM pointed AS p
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT p.run_id, p.lease_epoch, 'run.checkpointed',
           jsonb_build_object('seq', p.last_checkpoint), v_now
      FROM pointed AS p;
    IF FOUND THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(checkpoint.run_id, checkpoint.epoch, 'checkpoint', true);
END
$$;

REVOKE ALL ON FUNCTION runq.checkpoint(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.checkpoint(bigint, bigint, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.checkpoint(bigint, bigint, jsonb) IS
$c$Record the loop state of a run this worker holds under epoch, at a tool-invocation boundary; the next claim of the run returns the newest checkpoint. Returns true, or false when fenced or when cancel was requested (the run becomes cancelled).
Raises 22023 (NULL run_id, epoch or state), RQ003 (no such run).$c$;

COMMIT;
