-- Deploy runq:function_end_tool to pg
-- requires: table_runs
-- requires: table_run_events
-- requires: table_tool_calls
-- requires: function__refuse
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers after a tool returned. Applies even when cancel was
-- requested: the effect happened and the log must say so. The fenced update
-- of the run comes first, for the lock (see begin_tool).
-- Raises 22023 (NULL outcome, a call_id the run never began), RQ003, RQ004
-- (the call is not 'started'); false when fenced.
--
-- Reworked after v0.1.2: its arguments are checked by the shared checks of
-- argument_checks.
CREATE OR REPLACE FUNCTION runq.end_tool(run_id bigint, epoch bigint, call_id text, outcome jsonb)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_status  text;
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs them as one expression; a PERFORM
    -- would run them as a statement of its own.
    IF runq._check_identifier('call_id', end_tool.call_id)
       AND runq._check_jsonb('outcome', end_tool.outcome) THEN
    END IF;

    UPDATE runq.runs AS r
       SET updated_at = v_now
     WHERE r.run_id = end_tool.run_id
       AND r.status = 'running' AND r.lease_epoch = end_tool.epoch;  -- fence
    IF NOT FOUND THEN
        RETURN runq._refuse(end_tool.run_id, end_tool.epoch, 'end_tool', false);
    END IF;

    UPDATE runq.tool_calls AS t
       SET status = 'finished', outcome = end_tool.outcome, finished_at = v_now
     WHERE t.run_id = end_tool.run_id
       AND t.call_id = end_tool.call_id
       AND t.status = 'started';
    IF NOT FOUND THEN
        SELECT t.status::text INTO v_status
          FROM runq.tool_calls AS t
         WHERE t.run_id = end_tool.run_id AND t.call_id = end_tool.call_id;
        IF v_status IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('run %s never began tool call %s', end_tool.run_id, left(end_tool.call_id, 100));
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'RQ004',
            MESSAGE = format('tool call %s of run %s is %s, not started',
                             end_tool.call_id, end_tool.run_id, v_status);
    END IF;

    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    VALUES (end_tool.run_id, end_tool.epoch, 'run.tool_finished',
            jsonb_build_object('call_id', end_tool.call_id), v_now);
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.end_tool(bigint, bigint, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.end_tool(bigint, bigint, text, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.end_tool(bigint, bigint, text, jsonb) IS
$c$Record the outcome of tool call call_id of a run this worker holds under epoch (also after cancel was requested: the effect happened). Returns true, or false when fenced.
Raises 22023 (NULL run_id, epoch or outcome, a call_id not of 1 to 256 characters or never begun by the run), RQ003 (no such run), RQ004 (the call is not in status started).$c$;

COMMIT;
