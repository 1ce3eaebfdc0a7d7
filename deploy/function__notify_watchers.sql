-- Deploy runq:function__notify_watchers to pg
-- requires: column_runs_watched

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by every function that may end a run or make it wait for its user,
-- with the runs it changed, after it changed them (their rows locked by this
-- transaction). A watch (runq.watch) sets runs.watched under the same row
-- lock, so either the watch saw the change, or the change sees the flag: no
-- wake-up is lost. The hot paths call it only for a run whose row says it is
-- watched; a run nobody watches sends nothing (NOTIFY serialises commits).
-- Returns true, so that a statement can call it in a condition.
CREATE FUNCTION runq._notify_watchers(run_ids bigint[])
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('runq_run', r.run_id::text)
       FROM runq.runs AS r
      WHERE r.run_id = ANY (_notify_watchers.run_ids) AND r.watched
        AND r.status IN ('succeeded', 'failed', 'cancelled', 'waiting_for_user', 'waiting_for_children');
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq._notify_watchers(bigint[]) FROM PUBLIC;

COMMENT ON FUNCTION runq._notify_watchers(bigint[]) IS
    'Internal: NOTIFY runq_run (payload: the run_id) for each of these runs that is watched (runs.watched) and terminal, waiting_for_user or waiting_for_children. Returns true.';

COMMIT;
