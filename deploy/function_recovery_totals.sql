-- Deploy runq:function_recovery_totals to pg
-- requires: table_run_events
-- requires: index_run_events_fenced
-- requires: index_run_events_requeued
-- requires: role_runq_observer
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by metrics scrapes: how often the failure detector fired (requeues)
-- and how often it was wrong (fencings). Each count reads one partial index
-- of those rare events, never the log. The counts are of stored events, so a
-- purge lowers them (a Prometheus counter reads that as a reset).
CREATE FUNCTION runq.recovery_totals()
    RETURNS TABLE(fenced bigint, requeued bigint)
    LANGUAGE sql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT (SELECT count(*) FROM runq.run_events AS e WHERE e.type = 'run.fenced'),
           (SELECT count(*) FROM runq.run_events AS e
             WHERE e.type = 'run.requeued' AND e.payload ->> 'reason' = 'lease_expired');
END;

REVOKE ALL ON FUNCTION runq.recovery_totals() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.recovery_totals() TO runq_observer, runq_admin;

COMMENT ON FUNCTION runq.recovery_totals() IS
$c$The run.fenced events stored and the run.requeued events of an expired lease (a release is not counted): how often a stale worker was stopped, and how often an expired lease put a run back in the queue. A purge lowers both.$c$;

COMMIT;
