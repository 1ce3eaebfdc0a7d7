-- Deploy runq:function_model_calls to pg
-- requires: table_model_calls
-- requires: argument_checks
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: role_runq_observer

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by an agent loop once as an attempt starts after an earlier one
-- (epoch above 1), to replay the responses journaled, and by operators.
CREATE FUNCTION runq.model_calls(run_id bigint)
    RETURNS TABLE (seq bigint, epoch bigint, applied boolean, request_hash text, response jsonb,
                   usage jsonb, created_at timestamptz)
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT m.seq, m.epoch::bigint, m.applied, m.request_hash, m.response, m.usage, m.created_at
      FROM runq.model_calls AS m
     WHERE m.run_id = model_calls.run_id
     ORDER BY m.seq, m.epoch;
    IF NOT FOUND AND NOT EXISTS (SELECT FROM runq.runs AS r WHERE r.run_id = model_calls.run_id) THEN
        PERFORM runq._run_not_found(model_calls.run_id);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION runq.model_calls(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.model_calls(bigint) TO runq_worker, runq_admin, runq_observer;

COMMENT ON FUNCTION runq.model_calls(bigint) IS
$c$The run's journaled model requests (runq.record_model_call) in seq order, then epoch: seq, the epoch that sent it, applied (its writer held the run: replay it), the request's hash, the response, its usage, created_at. Not fenced: it reads.
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
