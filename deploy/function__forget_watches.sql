-- Deploy runq:function__forget_watches to pg
-- requires: table_watches
-- requires: column_runs_watched

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by the sweep. A session that ended never calls unwatch: its
-- watches are found by their pid and start time (see runq.watch) and go, and
-- a run left with none stops notifying. The runs are locked before the count
-- that decides, in a statement after the lock, as runq.unwatch does, so that
-- a watch committed meanwhile is counted.
CREATE FUNCTION runq._forget_watches()
    RETURNS integer
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_runs bigint[];
BEGIN
    WITH gone AS (
        DELETE FROM runq.watches AS w
         WHERE NOT EXISTS (SELECT FROM pg_stat_get_activity(w.pid::integer) AS a
                            WHERE coalesce(a.backend_start, '-infinity') = w.backend_start)
        RETURNING w.run_id
    )
    SELECT array_agg(DISTINCT g.run_id) INTO v_runs FROM gone AS g;
    IF v_runs IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM FROM runq.runs AS r WHERE r.run_id = ANY (v_runs) ORDER BY r.run_id FOR NO KEY UPDATE;
    UPDATE runq.runs AS r SET watched = NULL
     WHERE r.run_id = ANY (v_runs) AND r.watched
       AND NOT EXISTS (SELECT FROM runq.watches AS w WHERE w.run_id = r.run_id);
    RETURN cardinality(v_runs);
END
$$;

REVOKE ALL ON FUNCTION runq._forget_watches() FROM PUBLIC;

COMMENT ON FUNCTION runq._forget_watches() IS
    'Internal: delete the watches of sessions that ended, and clear runs.watched of the runs left with none. Returns how many runs lost a watch.';

COMMIT;
