-- Deploy runq:function_throughput to pg
-- requires: table_run_events
-- requires: index_run_events_created
-- requires: argument_checks
-- requires: role_runq_observer
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by dashboards: the chart of the last hour. It reads the events of
-- the window through run_events_created_idx, so its cost is the window's
-- events, not the log's. Minutes are bins of UTC (date_bin), the same in
-- every session's time zone.
-- Raises 22023 (since NULL or not finite).
CREATE FUNCTION runq.throughput(since timestamptz)
    RETURNS TABLE(minute timestamptz, started bigint, finished bigint)
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF throughput.since IS NULL OR NOT isfinite(throughput.since) THEN
        PERFORM runq._bad_argument('since', 'a finite time', throughput.since);
    END IF;
    RETURN QUERY
        SELECT date_bin('1 minute', e.created_at, timestamptz '2000-01-01 00:00+00') AS m,
               count(*) FILTER (WHERE e.type = 'run.claimed'),
               count(*) FILTER (WHERE e.type <> 'run.claimed')
          FROM runq.run_events AS e
         WHERE e.created_at >= throughput.since
           AND e.type IN ('run.claimed', 'run.succeeded', 'run.failed', 'run.cancelled')
         GROUP BY m
         ORDER BY m;
END
$$;

REVOKE ALL ON FUNCTION runq.throughput(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.throughput(timestamptz) TO runq_observer, runq_admin;

COMMENT ON FUNCTION runq.throughput(timestamptz) IS
$c$Runs started (claimed) and finished (succeeded, failed or cancelled) per minute since since, from the event log; minutes with neither are absent. Reads the window's events only.
Raises 22023 (since NULL or not finite).$c$;

COMMIT;
