-- Deploy runq:function_watch to pg
-- requires: table_watches
-- requires: column_runs_watched
-- requires: function_get_run
-- requires: type_run_info
-- requires: role_runq_client
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by a client that waits for a run (after LISTEN runq_run). The flag
-- is set by an UPDATE, which takes the run's row lock: a transition holding
-- it commits first, and the run returned (read after the lock, in a
-- statement of its own) shows it; a transition after it reads the flag and
-- notifies (runq._notify_watchers). So a session that listens, then
-- watches, either gets the run already ended in this answer or a
-- notification for every later change.
--
-- The session is named by its pid and start time (a pid is reused by later
-- sessions), which the sweep checks to forget the watches of sessions that
-- ended. pg_stat_get_activity shows the start time to the function's owner
-- only if it may see the caller's session (a superuser, pg_read_all_stats or
-- the same role); else -infinity stands in, and the sweep then goes by the
-- pid alone.
CREATE FUNCTION runq.watch(run_id bigint)
    RETURNS runq.run_info
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE runq.runs AS r SET watched = true WHERE r.run_id = watch.run_id;
    IF NOT FOUND THEN
        -- A NULL run_id matches nothing, and is reported here.
        PERFORM runq._run_not_found(watch.run_id);
    END IF;
    INSERT INTO runq.watches (run_id, pid, backend_start)
    SELECT watch.run_id, pg_backend_pid(), coalesce(a.backend_start, '-infinity')
      FROM pg_stat_get_activity(pg_backend_pid()) AS a
        ON CONFLICT DO NOTHING;
    RETURN runq.get_run(watch.run_id);
END
$$;

REVOKE ALL ON FUNCTION runq.watch(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.watch(bigint) TO runq_client, runq_admin;

COMMENT ON FUNCTION runq.watch(bigint) IS
$c$Watch the run from this session until it calls runq.unwatch or ends: every transaction that moves the run to a terminal status, to waiting_for_user or to waiting_for_children, or appends to its output (runq.emit), sends NOTIFY runq_run with the run_id as payload. Returns the run as it is once the watch is in place (as runq.get_run). LISTEN runq_run first: then no change is missed, whatever the interleaving; a run already ended or waiting is in the answer. Needs a session connection (behind PgBouncer in transaction mode LISTEN hears nothing). Transitions of runs nobody watches send nothing.
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
