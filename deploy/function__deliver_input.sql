-- Deploy runq:function__deliver_input to pg
-- requires: table_runs
-- requires: table_inputs
-- requires: table_run_events
-- requires: admission

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Shared by runq.deliver_input and runq.submit's routing, with the run locked
-- and known to be waiting_for_user: store the input, requeue the run with a
-- fresh attempt budget, log it, wake a worker. The run keeps its created_at,
-- so it goes to the front of its class: a user is waiting on it.
--
-- The run is admitted or parked when limits or pauses are set
-- (runq._requeued, deploy/admission.sql).
CREATE OR REPLACE FUNCTION runq._deliver_input(run_id bigint, input jsonb, at timestamptz)
    RETURNS void
    LANGUAGE sql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH requeued AS (
        UPDATE runq.runs AS r
           SET status = 'queued', attempts = 0, question = NULL, updated_at = at
         WHERE r.run_id = _deliver_input.run_id
           AND r.status = 'waiting_for_user'
        RETURNING r.run_id, r.lease_epoch
    ), stored AS (
        INSERT INTO runq.inputs (run_id, delivered_at, input)
        SELECT q.run_id, at, _deliver_input.input FROM requeued AS q
        RETURNING inputs.seq
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT q.run_id, q.lease_epoch, 'run.input_delivered',
           jsonb_build_object('input', _deliver_input.input,
                              'seq', (SELECT s.seq FROM stored AS s)), at
      FROM requeued AS q;

    -- Back in the queue from waiting_for_user, it needs admitting when limits
    -- or pauses are set (deploy/admission.sql).
    SELECT runq._requeued(_deliver_input.run_id, false);

    SELECT pg_notify('runq', '');
$$;

REVOKE ALL ON FUNCTION runq._deliver_input(bigint, jsonb, timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._deliver_input(bigint, jsonb, timestamptz) IS
    'Internal: delivers input to a locked waiting_for_user run and requeues it.';

COMMIT;
