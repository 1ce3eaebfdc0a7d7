-- Deploy runq:function_run_events to pg
-- requires: table_runs
-- requires: table_run_events
-- requires: type_run_event
-- requires: role_runq_client
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by submitters and operators; reads a run's event log. Raises RQ003.
--
-- Reworked after v0.1.2: a NULL or missing run is reported by
-- runq._run_not_found, which every function that looks a run up shares.
CREATE OR REPLACE FUNCTION runq.run_events(run_id bigint)
    RETURNS SETOF runq.run_event
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM FROM runq.runs AS r WHERE r.run_id = run_events.run_id;
    IF NOT FOUND THEN
        -- A NULL run_id matches nothing, and is reported here.
        PERFORM runq._run_not_found(run_events.run_id);
    END IF;
    RETURN QUERY
        SELECT e.event_id, e.epoch::bigint, e.type::text, e.payload::jsonb, e.created_at
          FROM runq.run_events AS e
         WHERE e.run_id = run_events.run_id
         ORDER BY e.event_id;
END
$$;

REVOKE ALL ON FUNCTION runq.run_events(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.run_events(bigint) TO runq_client, runq_admin;

COMMENT ON FUNCTION runq.run_events(bigint) IS
$c$A run's events in order: event_id, epoch, type, payload, created_at. Every transition appends one in its own transaction; heartbeats append none.
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
