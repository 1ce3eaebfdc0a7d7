-- Deploy runq:function_deliver_input to pg
-- requires: function__deliver_input
-- requires: role_runq_client
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by submitters answering a run's question. Locks the run. Raises
-- 22023 (NULL input), RQ003 (no such run), RQ004 (not waiting_for_user).
--
-- Reworked after v0.1.2: a NULL or missing run is reported by
-- runq._run_not_found, which every function that looks a run up shares.
CREATE OR REPLACE FUNCTION runq.deliver_input(run_id bigint, input jsonb)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_status text;
BEGIN
    IF runq._check_jsonb('input', deliver_input.input) THEN
    END IF;

    SELECT r.status::text INTO v_status
      FROM runq.runs AS r
     WHERE r.run_id = deliver_input.run_id
       FOR UPDATE;
    IF NOT FOUND THEN
        -- A NULL run_id matches nothing, and is reported here.
        PERFORM runq._run_not_found(deliver_input.run_id);
    ELSIF v_status <> 'waiting_for_user' THEN
        RAISE EXCEPTION USING ERRCODE = 'RQ004',
            MESSAGE = format('run %s is %s, not waiting_for_user', deliver_input.run_id, v_status),
            HINT = 'Only a run waiting for the user takes input.';
    END IF;

    PERFORM runq._deliver_input(deliver_input.run_id, deliver_input.input, clock_timestamp());
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.deliver_input(bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.deliver_input(bigint, jsonb) TO runq_client, runq_admin;

COMMENT ON FUNCTION runq.deliver_input(bigint, jsonb) IS
$c$Deliver the user's input to a waiting_for_user run: the input is stored, the run is queued again with its attempts reset, and the next claim hands the input over. Returns true.
Raises RQ003 (no such run), RQ004 (the run is not waiting_for_user), 22023 (NULL run_id or input).$c$;

COMMIT;
