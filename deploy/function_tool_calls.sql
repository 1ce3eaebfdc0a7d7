-- Deploy runq:function_tool_calls to pg
-- requires: table_runs
-- requires: table_tool_calls
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers resuming a run (which calls are retryable, which are
-- uncertain) and by operators. Reads only. Raises RQ003.
--
-- Reworked after v0.1.2: a NULL or missing run is reported by
-- runq._run_not_found, which every function that looks a run up shares.
CREATE OR REPLACE FUNCTION runq.tool_calls(run_id bigint)
    RETURNS TABLE(call_id text, tool text, idempotency text, status text, epoch bigint,
                  args jsonb, outcome jsonb, started_at timestamptz, finished_at timestamptz)
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM FROM runq.runs AS r WHERE r.run_id = tool_calls.run_id;
    IF NOT FOUND THEN
        -- A NULL run_id matches nothing, and is reported here.
        PERFORM runq._run_not_found(tool_calls.run_id);
    END IF;
    RETURN QUERY
        SELECT t.call_id::text, t.tool::text, t.idempotency::text, t.status::text,
               t.epoch::bigint, t.args::jsonb, t.outcome, t.started_at, t.finished_at
          FROM runq.tool_calls AS t
         WHERE t.run_id = tool_calls.run_id
         ORDER BY t.started_at, t.call_id;
END
$$;

REVOKE ALL ON FUNCTION runq.tool_calls(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.tool_calls(bigint) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.tool_calls(bigint) IS
$c$A run's tool calls in the order they began: call_id, tool, idempotency, status (started, finished, retryable or uncertain), epoch, args, outcome, started_at, finished_at. An uncertain call is a non_idempotent call whose lease died before end_tool: report it to the model as an unknown outcome, never as a failure.
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
