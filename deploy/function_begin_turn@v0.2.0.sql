-- Deploy runq:function_begin_turn to pg
-- requires: table_runs
-- requires: table_run_events
-- requires: function__refuse
-- requires: stop_failures
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers before every chargeable model call. The counter is what
-- the zero_work recovery policy reads: a run that began a turn may have
-- charged someone and is never silently run again.
-- Raises RQ003; false when fenced or cancelled.
--
-- Past the run's deadline, the holder's call fails the run
-- (deadline_exceeded, through runq._refuse) and returns false.
-- And the budget gate: once a total of the run's usage has reached its
-- budget, the call fails the run (budget_exhausted) instead of counting a turn.
CREATE OR REPLACE FUNCTION runq.begin_turn(run_id bigint, epoch bigint)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    WITH counted AS (
        UPDATE runq.runs AS r
           SET turns = r.turns + 1, updated_at = v_now
         WHERE r.run_id = begin_turn.run_id
           AND r.status = 'running' AND r.lease_epoch = begin_turn.epoch  -- fence
           AND NOT r.cancel_requested
           AND (r.deadline IS NULL OR r.deadline > v_now)  -- else runq._refuse fails it
           -- The gate: no total of the run's usage has reached its budget.
           -- Written into this statement, planned once a session with it: as
           -- a call of runq._budget_overrun it cost a turn of a run with a
           -- budget 5 % in instructions, and this 2 %. Its plan is started
           -- for a run without a budget too (1.5 %), as is one more statement
           -- for only the runs with one (7 %: an UPDATE's start opens runs).
           AND (r.budget IS NULL
                OR NOT EXISTS (SELECT FROM jsonb_each(r.budget) AS b (key, value)
                                WHERE runq._is_reached((SELECT u.usage -> b.key
                                                          FROM runq.run_usage AS u
                                                         WHERE u.run_id = r.run_id),
                                                       b.value)))
        RETURNING r.run_id, r.lease_epoch, r.turns
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT c.run_id, c.lease_epoch, 'run.turn_started',
           jsonb_build_object('turn', c.turns), v_now
      FROM counted AS c;
    IF FOUND THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(begin_turn.run_id, begin_turn.epoch, 'begin_turn', true);
END
$$;

REVOKE ALL ON FUNCTION runq.begin_turn(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.begin_turn(bigint, bigint) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.begin_turn(bigint, bigint) IS
$c$Record, before a chargeable model call, that a run this worker holds under epoch starts a turn (the run's turn count grows; a run with a turn is never requeued under the zero_work policy). Returns true, or false when fenced, when cancel was requested (the run becomes cancelled), past the run's deadline (it becomes failed, deadline_exceeded), or, the budget gate, once a total of the run's usage has reached its budget (usage[k] >= budget[k]: it becomes failed, budget_exhausted, naming the key, the limit and the total).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
