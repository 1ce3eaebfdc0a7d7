-- Deploy runq:function_dead_letter to pg
-- requires: table_runs
-- requires: index_runs_dead_letter
-- requires: type_run_info
-- requires: column_runs_budget
-- requires: table_run_usage
-- requires: columns_runs_deadline
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators (runq failed). Reads only failed runs, through the
-- partial runs_dead_letter_idx, newest failure first.
-- Raises 22023 (max_runs NULL or below 1).
--
-- max_runs is checked by runq._check_count.
--
-- Its rows end with the run's usage totals, budget and deadline (the last
-- columns of runq.run_info); the totals come from runq.run_usage.
CREATE OR REPLACE FUNCTION runq.dead_letter(max_runs integer DEFAULT 100)
    RETURNS SETOF runq.run_info
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs them as one expression; a PERFORM
    -- would run them as a statement of its own.
    IF runq._check_count('max_runs', dead_letter.max_runs) THEN
    END IF;
    RETURN QUERY
        SELECT r.run_id, r.tenant_id::text, r.session_id::text, r.kind::text, r.status::text,
               r.priority::integer, r.attempts::integer, r.max_attempts::integer,
               r.scheduled_for, r.lease_epoch::bigint, r.cancel_requested, r.result,
               r.failure::jsonb, r.question, r.created_at, r.updated_at, r.finished_at,
               coalesce(u.usage, '{}'), r.budget, r.deadline
          FROM runq.runs AS r
          LEFT JOIN runq.run_usage AS u ON u.run_id = r.run_id
         WHERE r.status = 'failed'
         ORDER BY r.finished_at DESC, r.run_id DESC
         LIMIT dead_letter.max_runs;
END
$$;

REVOKE ALL ON FUNCTION runq.dead_letter(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.dead_letter(integer) TO runq_admin;

COMMENT ON FUNCTION runq.dead_letter(integer) IS
$c$The dead letter: up to max_runs failed runs, newest failure first, with the columns of runq.get_run (failure says why). runq.redrive takes one back out.
Raises 22023 (max_runs NULL or below 1).$c$;

COMMIT;
