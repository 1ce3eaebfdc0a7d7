-- Revert runq:function_get_run from pg
-- (back to the version of v0.2.0)

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by submitters and operators; reads one row. Raises RQ003.
--
-- A NULL or missing run is reported by runq._run_not_found, which every
-- function that looks a run up shares.
--
-- Its rows end with the run's usage totals, budget and deadline (the last
-- columns of runq.run_info); the totals come from runq.run_usage.
CREATE OR REPLACE FUNCTION runq.get_run(run_id bigint)
    RETURNS runq.run_info
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run runq.run_info;
BEGIN
    SELECT r.run_id, r.tenant_id::text, r.session_id::text, r.kind::text, r.status::text,
           r.priority::integer, r.attempts::integer, r.max_attempts::integer,
           r.scheduled_for, r.lease_epoch::bigint, r.cancel_requested, r.result,
           r.failure::jsonb, r.question, r.created_at, r.updated_at, r.finished_at,
           coalesce(u.usage, '{}'), r.budget, r.deadline
      INTO v_run
      FROM runq.runs AS r
      LEFT JOIN runq.run_usage AS u ON u.run_id = r.run_id
     WHERE r.run_id = get_run.run_id;
    IF NOT FOUND THEN
        -- A NULL run_id matches nothing, and is reported here.
        PERFORM runq._run_not_found(get_run.run_id);
    END IF;
    RETURN v_run;
END
$$;

REVOKE ALL ON FUNCTION runq.get_run(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.get_run(bigint) TO runq_client, runq_admin;

COMMENT ON FUNCTION runq.get_run(bigint) IS
$c$One run: run_id, tenant_id, session_id, kind, status, priority, attempts, max_attempts, scheduled_for, lease_epoch, cancel_requested, result, failure, question, created_at, updated_at, finished_at, usage (the totals every attempt recorded, exact sums; {} when none), budget, deadline (use SELECT * FROM runq.get_run(id)).
Raises 22023 (NULL run_id), RQ003 (no such run).$c$;

COMMIT;
