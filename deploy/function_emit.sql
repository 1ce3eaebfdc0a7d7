-- Deploy runq:function_emit to pg
-- requires: table_run_output
-- requires: column_runs_watched
-- requires: function__refuse
-- requires: argument_checks
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers as a run produces output (a model's tokens, progress).
-- Output is not a transition: no event, and the run's row is not written,
-- only locked (FOR NO KEY UPDATE), which orders the emits of a run and puts
-- each after the completion or the fence it meets: a reader that sees the
-- run ended has seen all of its output. The chunks are numbered after the
-- lock, in a statement of its own (a snapshot taken after the emit before
-- committed), so seq runs 1, 2, 3, ... without gaps in commit order.
CREATE FUNCTION runq.emit(run_id bigint, epoch bigint, chunks jsonb[])
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_watched boolean;
BEGIN
    IF NOT coalesce(cardinality(emit.chunks) > 0 AND array_position(emit.chunks, NULL) IS NULL,
                    false) THEN
        PERFORM runq._bad_argument('chunks', 'a non-empty array of jsonb values, none NULL',
                                   emit.chunks);
    END IF;

    SELECT r.watched INTO v_watched
      FROM runq.runs AS r
     WHERE r.run_id = emit.run_id
       AND r.status = 'running' AND r.lease_epoch = emit.epoch  -- fence
       AND NOT r.cancel_requested
       AND (r.deadline IS NULL OR r.deadline > v_now)  -- else runq._refuse fails it
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN runq._refuse(emit.run_id, emit.epoch, 'emit', true);
    END IF;

    INSERT INTO runq.run_output (run_id, seq, epoch, created_at, chunk)
    SELECT emit.run_id,
           coalesce((SELECT max(o.seq) FROM runq.run_output AS o WHERE o.run_id = emit.run_id), 0)
           + c.n,
           emit.epoch, v_now, c.chunk
      FROM unnest(emit.chunks) WITH ORDINALITY AS c (chunk, n);
    IF v_watched THEN
        PERFORM pg_notify('runq_run', emit.run_id::text);
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION runq.emit(bigint, bigint, jsonb[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.emit(bigint, bigint, jsonb[]) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.emit(bigint, bigint, jsonb[]) IS
$c$Append chunks, in order, to the run's output under epoch (read with runq.read_output: numbered 1, 2, 3, ... per run without gaps, in the order the emits committed). Logs no event. Returns true; false when the run is no longer the caller's (fenced: nothing stored, one run.fenced; an epoch the run never had: nothing logged), and, as begin_tool, on a run asked to cancel (it becomes cancelled) or past its deadline (it fails with deadline_exceeded). A watched run (runq.watch) notifies runq_run.
Raises 22023 (chunks NULL, empty or holding a NULL; NULL epoch), RQ003 (no such run).$c$;

COMMIT;
