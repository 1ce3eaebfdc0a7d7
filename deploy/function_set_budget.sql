-- Deploy runq:function_set_budget to pg
-- requires: function_set_budget@v0.2.0
-- requires: domain_run_status

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators: raise (or lower, or remove) a run's budget. Not for a
-- run that succeeded or was cancelled, which will spend nothing more; a
-- failed one may be redriven, and a budget_exhausted one needs a larger
-- budget first. The totals are never touched: they are what was spent.
CREATE OR REPLACE FUNCTION runq.set_budget(run_id bigint, budget jsonb)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF runq._check_usage('budget', set_budget.budget, optional => true) THEN
    END IF;
    UPDATE runq.runs AS r
       SET budget = set_budget.budget, updated_at = clock_timestamp()
     WHERE r.run_id = set_budget.run_id
       AND r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children', 'failed');
    IF FOUND THEN
        RETURN true;
    END IF;
    IF NOT EXISTS (SELECT FROM runq.runs AS r WHERE r.run_id = set_budget.run_id) THEN
        PERFORM runq._run_not_found(set_budget.run_id);
    END IF;
    RETURN false;
END
$$;

REVOKE ALL ON FUNCTION runq.set_budget(bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.set_budget(bigint, jsonb) TO runq_admin;

COMMENT ON FUNCTION runq.set_budget(bigint, jsonb) IS
$c$Replace the budget of a queued, running, waiting_for_user, waiting_for_children or failed run (NULL removes it): true. false for a run that succeeded or was cancelled, which is left as it is. The usage totals are never changed.
Raises 22023 (budget not NULL or a non-empty object of non-negative numbers, NULL run_id), RQ003 (no such run).$c$;

COMMIT;
