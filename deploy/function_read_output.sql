-- Deploy runq:function_read_output to pg
-- requires: table_run_output
-- requires: argument_checks
-- requires: role_runq_client
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: role_runq_observer

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by readers of a run's output, repeatedly, each time after the last
-- seq they read: a range of run_output's key. Chunks commit in seq order
-- (runq.emit), so a snapshot that holds chunk n holds every chunk before it.
CREATE FUNCTION runq.read_output(run_id bigint, after_seq bigint DEFAULT 0,
                                 max_chunks integer DEFAULT 1000)
    RETURNS TABLE (seq bigint, epoch bigint, chunk jsonb, created_at timestamptz)
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks).
    IF runq._check_count('max_chunks', read_output.max_chunks)
       AND (CASE WHEN read_output.after_seq IS NOT NULL THEN true
                 ELSE runq._bad_argument('after_seq', 'a sequence number (0: from the start)',
                                         read_output.after_seq) END) THEN
    END IF;
    RETURN QUERY
    SELECT o.seq, o.epoch, o.chunk, o.created_at
      FROM runq.run_output AS o
     WHERE o.run_id = read_output.run_id AND o.seq > read_output.after_seq
     ORDER BY o.seq
     LIMIT read_output.max_chunks;
    IF NOT FOUND AND NOT EXISTS (SELECT FROM runq.runs AS r WHERE r.run_id = read_output.run_id) THEN
        PERFORM runq._run_not_found(read_output.run_id);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION runq.read_output(bigint, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.read_output(bigint, bigint, integer)
    TO runq_client, runq_worker, runq_admin, runq_observer;

COMMENT ON FUNCTION runq.read_output(bigint, bigint, integer) IS
$c$The run's output chunks (runq.emit) with seq > after_seq, in seq order, at most max_chunks: seq, the epoch that wrote it, the chunk, created_at. Read again after the last seq read: nothing is missed or seen twice. Output of an earlier epoch stays (the run started over from its checkpoint).
Raises 22023 (max_chunks NULL or below 1, NULL after_seq), RQ003 (no such run).$c$;

COMMIT;
