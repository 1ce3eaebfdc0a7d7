-- Deploy runq:function__resolve_tool_calls to pg
-- requires: table_tool_calls
-- requires: table_run_events

BEGIN;

-- Called when a lease dies (sweep, release, cancel observed by a worker
-- write), with the runs already locked. A call still 'started' belongs to the
-- dead epoch: nobody knows whether it ran. read_only and idempotent calls may
-- simply run again; a non_idempotent one is 'uncertain' and the model is told
-- so, never that it failed.
CREATE FUNCTION runq._resolve_tool_calls(run_ids bigint[], at timestamptz)
    RETURNS void
    LANGUAGE sql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH resolved AS (
        UPDATE runq.tool_calls AS t
           SET status = CASE WHEN t.idempotency = 'non_idempotent'
                             THEN 'uncertain' ELSE 'retryable' END
         WHERE t.run_id = ANY (run_ids)
           AND t.status = 'started'
        RETURNING t.run_id, t.call_id, t.tool, t.epoch, t.status
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT r.run_id, r.epoch, 'run.tool_uncertain',
           jsonb_build_object('call_id', r.call_id, 'tool', r.tool), at
      FROM resolved AS r
     WHERE r.status = 'uncertain'
     ORDER BY r.run_id, r.call_id
$$;

REVOKE ALL ON FUNCTION runq._resolve_tool_calls(bigint[], timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._resolve_tool_calls(bigint[], timestamptz) IS
    'Internal: marks tool calls left started by a dead lease retryable or uncertain.';

COMMIT;
