-- Deploy runq:function_heartbeat_many to pg
-- requires: table_runs
-- requires: function__answer_batch
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- One round trip and one statement for every in-flight run of a worker:
-- each element is runq.heartbeat's fenced update, and runq._answer_batch
-- answers the elements as runq.heartbeat would. A worker's own runs are
-- locked by no other worker's batch (only the epoch holder's elements match),
-- so batches do not deadlock.
--
-- Past the run's deadline, the holder's call fails the run
-- (deadline_exceeded, through runq._refuse) and returns false.
CREATE OR REPLACE FUNCTION runq.heartbeat_many(run_ids bigint[], epochs bigint[])
    RETURNS TABLE(run_id bigint, alive boolean)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_alive bigint[];
BEGIN
    WITH beaten AS (
        UPDATE runq.runs AS r
           SET heartbeat_at = v_now,
               lease_expires_at = v_now + r.lease
          FROM unnest(heartbeat_many.run_ids, heartbeat_many.epochs) AS b(run_id, epoch)
         WHERE r.run_id = b.run_id
           AND r.status = 'running' AND r.lease_epoch = b.epoch  -- fence
           AND NOT r.cancel_requested
           AND (r.deadline IS NULL OR r.deadline > v_now)  -- else runq._refuse fails it
        RETURNING r.run_id
    )
    SELECT array_agg(x.run_id) INTO v_alive FROM beaten AS x;
    RETURN QUERY SELECT a.run_id, a.applied
                   FROM runq._answer_batch(heartbeat_many.run_ids, heartbeat_many.epochs, NULL,
                                           v_alive, 'heartbeat', true) AS a;
END
$$;

REVOKE ALL ON FUNCTION runq.heartbeat_many(bigint[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.heartbeat_many(bigint[], bigint[]) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.heartbeat_many(bigint[], bigint[]) IS
$c$runq.heartbeat for many runs in one statement: the run run_ids[i] under epochs[i], one row per element in the order given. alive is what runq.heartbeat would return for it: true, or false when that run is fenced (one run.fenced event) or cancel was requested (the run becomes cancelled now) or the run is past its deadline (it becomes failed now, deadline_exceeded).
Raises 22023 (NULL array, arrays of different lengths, a NULL run_id or epoch, a run_id given twice), RQ003 (no such run, named; the whole call then changes nothing).$c$;

COMMIT;
