-- Deploy runq:function_orphan_report to pg
-- requires: table_runs
-- requires: index_runs_held
-- requires: table_settings
-- requires: role_runq_admin

BEGIN;

-- Called by operators, for instance when a worker fleet restarts. It reads
-- only: a fresh process cannot tell a run abandoned by a dead worker from one
-- a live sibling is executing, so nothing is reclaimed by status alone; the
-- sweep decides on lease expiry. lease_owner is reported, not trusted (a
-- restarted container often reuses its predecessor's identity).
-- Raises 22023 (stale_after not positive).
CREATE FUNCTION runq.orphan_report(stale_after interval DEFAULT NULL)
    RETURNS TABLE(lease_owner text, stale boolean, did_work boolean, runs bigint,
                  oldest_heartbeat_at timestamptz)
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_stale  interval := orphan_report.stale_after;
BEGIN
    IF v_stale <= interval '0' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('stale_after must be positive, got %s', v_stale);
    ELSIF v_stale IS NULL THEN
        SELECT coalesce(s.stale_after, greatest(interval '2 minutes', 5 * s.lease / 3))
          INTO v_stale
          FROM runq.settings AS s;
    END IF;

    RETURN QUERY
        SELECT r.lease_owner,
               -- an age against the threshold: no time arithmetic can overflow
               v_now - r.heartbeat_at > v_stale,
               r.turns > 0 OR r.tools_begun > 0,
               count(*),
               min(r.heartbeat_at)
          FROM runq.runs AS r
         WHERE r.status = 'running'
         GROUP BY 1, 2, 3
         ORDER BY 1, 2, 3;
END
$$;

REVOKE ALL ON FUNCTION runq.orphan_report(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.orphan_report(interval) TO runq_admin;

COMMENT ON FUNCTION runq.orphan_report(interval) IS
$c$Read-only report of running runs grouped by lease_owner, by whether their last heartbeat is older than stale_after (default: runq.settings.stale_after, else greatest(2 minutes, 5 * lease / 3)), and by whether they did work (a turn or a tool call). Transitions nothing: the sweep decides on lease expiry.
Raises 22023 (stale_after not positive).$c$;

COMMIT;
