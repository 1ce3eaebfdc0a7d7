-- Deploy runq:function_begin_tool to pg
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

-- Called by workers before a tool executes, with the tool's declared
-- idempotency class, which decides what a dead lease makes of the call
-- (runq._resolve_tool_calls). Locks the run with the fenced update first, so
-- a sweep cannot resolve calls between the fence and the insert. A call_id
-- may begin again after it became retryable or uncertain (a new attempt), or
-- repeat under the same epoch (a client retry); a finished call may not.
-- Raises 22023 (bad arguments), RQ003, RQ004 (call already finished or
-- started by another epoch); false when fenced or cancelled.
--
-- The arguments are checked by the shared checks of argument_checks.
--
-- Past the run's deadline, the holder's call fails the run
-- (deadline_exceeded, through runq._refuse) and returns false.
CREATE OR REPLACE FUNCTION runq.begin_tool(
    run_id       bigint,
    epoch        bigint,
    call_id      text,
    tool         text,
    idempotency  text,
    args         jsonb DEFAULT '{}')
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
    IF runq._check_identifier('call_id', begin_tool.call_id)
       AND runq._check_identifier('tool', begin_tool.tool)
       AND runq._check_choice('idempotency', begin_tool.idempotency,
                              'read_only, idempotent, non_idempotent')
       AND runq._check_object('args', begin_tool.args) THEN
    END IF;

    UPDATE runq.runs AS r
       SET tools_begun = r.tools_begun + 1, updated_at = v_now
     WHERE r.run_id = begin_tool.run_id
       AND r.status = 'running' AND r.lease_epoch = begin_tool.epoch  -- fence
       AND NOT r.cancel_requested
       AND (r.deadline IS NULL OR r.deadline > v_now);  -- else runq._refuse fails it
    IF NOT FOUND THEN
        RETURN runq._refuse(begin_tool.run_id, begin_tool.epoch, 'begin_tool', true);
    END IF;

    INSERT INTO runq.tool_calls AS t
           (run_id, call_id, epoch, started_at, tool, idempotency, args)
    VALUES (begin_tool.run_id, begin_tool.call_id, begin_tool.epoch, v_now,
            begin_tool.tool, begin_tool.idempotency, begin_tool.args)
    ON CONFLICT ON CONSTRAINT tool_calls_pkey DO UPDATE
       SET epoch = excluded.epoch, started_at = excluded.started_at,
           finished_at = NULL, tool = excluded.tool,
           idempotency = excluded.idempotency, status = 'started',
           args = excluded.args, outcome = NULL
     WHERE t.status IN ('retryable', 'uncertain')
        OR (t.status = 'started' AND t.epoch = excluded.epoch)
    RETURNING t.status::text INTO v_status;
    IF NOT FOUND THEN
        SELECT t.status::text INTO v_status
          FROM runq.tool_calls AS t
         WHERE t.run_id = begin_tool.run_id AND t.call_id = begin_tool.call_id;
        RAISE EXCEPTION USING ERRCODE = 'RQ004',
            MESSAGE = format('tool call %s of run %s is already %s',
                             begin_tool.call_id, begin_tool.run_id, v_status),
            HINT = 'Use a new call_id for a new invocation.';
    END IF;

    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    VALUES (begin_tool.run_id, begin_tool.epoch, 'run.tool_started',
            jsonb_build_object('call_id', begin_tool.call_id, 'tool', begin_tool.tool,
                               'idempotency', begin_tool.idempotency),
            v_now);
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.begin_tool(bigint, bigint, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.begin_tool(bigint, bigint, text, text, text, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.begin_tool(bigint, bigint, text, text, text, jsonb) IS
$c$Record, before the tool executes, that a run this worker holds under epoch starts tool call call_id. idempotency is the tool's class: read_only, idempotent or non_idempotent; if the lease dies before end_tool, the call becomes retryable (read_only, idempotent) or uncertain (non_idempotent). A retryable or uncertain call_id may begin again. Returns true, or false when fenced, when cancel was requested (the run becomes cancelled) or past the run's deadline (it becomes failed, deadline_exceeded).
Raises 22023 (NULL run_id or epoch, a call_id or tool not of 1 to 256 characters, an idempotency not read_only, idempotent or non_idempotent, args not an object), RQ003 (no such run), RQ004 (call_id already finished, or started under another epoch).$c$;

COMMIT;
