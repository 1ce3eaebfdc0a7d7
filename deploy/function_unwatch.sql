-- Deploy runq:function_unwatch to pg
-- requires: table_watches
-- requires: column_runs_watched
-- requires: role_runq_client
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The last watch of a run clears its flag. The run's row is locked first, as
-- runq.watch locks it: a watch of another session either committed before
-- (and its row is seen by the count, in a statement after the lock) or
-- waits, and sets the flag again after this clears it.
CREATE FUNCTION runq.unwatch(run_id bigint)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_watched boolean;
BEGIN
    PERFORM FROM runq.runs AS r WHERE r.run_id = unwatch.run_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM runq._run_not_found(unwatch.run_id);
    END IF;
    DELETE FROM runq.watches AS w
     USING pg_stat_get_activity(pg_backend_pid()) AS a
     WHERE w.run_id = unwatch.run_id AND w.pid = pg_backend_pid()
       AND w.backend_start = coalesce(a.backend_start, '-infinity');
    v_watched := FOUND;
    IF v_watched THEN
        UPDATE runq.runs AS r SET watched = NULL
         WHERE r.run_id = unwatch.run_id
           AND NOT EXISTS (SELECT FROM runq.watches AS w WHERE w.run_id = unwatch.run_id);
    END IF;
    RETURN v_watched;
END
$$;

REVOKE ALL ON FUNCTION runq.unwatch(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.unwatch(bigint) TO runq_client, runq_admin;

COMMENT ON FUNCTION runq.unwatch(bigint) IS
$c$End this session's watch of the run (runq.watch). Returns true when there was one, false when there was none. A session's watches also end with the session (the sweep forgets them).
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
