-- Deploy runq:stop_failures to pg
-- requires: stop_failures@v0.2.0
-- requires: columns_runs_parent

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
SET LOCAL search_path = pg_catalog, pg_temp;

-- Budgets roll up (child runs): a child's spend is added to every ancestor's
-- totals (runq.record_usage), and the budget gate of a child stops it when
-- its own budget or any ancestor's is reached. The overrun now names the run
-- whose budget it was.
CREATE OR REPLACE FUNCTION runq._budget_overrun(run_id bigint, budget jsonb)
    RETURNS jsonb
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT jsonb_build_object('run_id', _budget_overrun.run_id, 'key', b.key,
                                      'limit', b.value,
                                      'total', coalesce(u.usage -> b.key, '0'::jsonb))
              FROM jsonb_each(_budget_overrun.budget) WITH ORDINALITY AS b (key, value, n)
              LEFT JOIN runq.run_usage AS u ON u.run_id = _budget_overrun.run_id
             WHERE runq._is_reached(u.usage -> b.key, b.value)
             ORDER BY b.n
             LIMIT 1);
END
$$;

-- The nearest ancestor, from run_id (a parent) up, whose budget is reached:
-- at most runq.settings.max_child_depth lookups of runs by key.
CREATE FUNCTION runq._ancestor_overrun(run_id bigint)
    RETURNS jsonb
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (WITH RECURSIVE up (run_id, parent_run_id, budget, depth) AS (
                SELECT r.run_id, r.parent_run_id, r.budget, 1
                  FROM runq.runs AS r WHERE r.run_id = _ancestor_overrun.run_id
                UNION ALL
                SELECT r.run_id, r.parent_run_id, r.budget, up.depth + 1
                  FROM up JOIN runq.runs AS r ON r.run_id = up.parent_run_id
            )
            SELECT o.overrun
              FROM up, LATERAL (SELECT runq._budget_overrun(up.run_id, up.budget)) AS o (overrun)
             WHERE up.budget IS NOT NULL AND o.overrun IS NOT NULL
             ORDER BY up.depth
             LIMIT 1);
END
$$;

CREATE OR REPLACE FUNCTION runq._stop_failure(run runq.runs, gated boolean, at timestamptz)
    RETURNS jsonb
    LANGUAGE sql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN (run).deadline <= at THEN jsonb_build_object(
            'code', 'deadline_exceeded',
            'message', format('not finished by its deadline %s (timeout %s)',
                              (run).deadline, (run).timeout),
            'deadline', (run).deadline, 'timeout', (run).timeout,
            'attempt', (run).attempts, 'epoch', (run).lease_epoch, 'at', at)
        WHEN gated THEN (
            SELECT jsonb_build_object(
                       'code', 'budget_exhausted',
                       'message', CASE WHEN (o.overrun ->> 'run_id')::bigint = (run).run_id
                                       THEN format('%s reached %s of its budget of %s',
                                                   o.overrun ->> 'key', o.overrun -> 'total', o.overrun -> 'limit')
                                       ELSE format('%s reached %s of the budget of %s of its ancestor run %s',
                                                   o.overrun ->> 'key', o.overrun -> 'total', o.overrun -> 'limit',
                                                   o.overrun ->> 'run_id') END,
                       'attempt', (run).attempts, 'epoch', (run).lease_epoch, 'at', at)
                   || o.overrun
              FROM (SELECT coalesce(runq._budget_overrun((run).run_id, (run).budget),
                                    runq._ancestor_overrun((run).parent_run_id))) AS o (overrun)
             WHERE o.overrun IS NOT NULL)
    END
$$;

REVOKE ALL ON FUNCTION runq._ancestor_overrun(bigint) FROM PUBLIC;

COMMENT ON FUNCTION runq._budget_overrun(bigint, jsonb) IS
    'Internal: {run_id, key, limit, total} of the first key of a run''s budget whose total (runq.run_usage) reached its limit, or NULL.';
COMMENT ON FUNCTION runq._ancestor_overrun(bigint) IS
    'Internal: runq._budget_overrun of the nearest of a run and its ancestors whose budget is reached, or NULL (NULL run_id: NULL).';
COMMENT ON FUNCTION runq._stop_failure(runq.runs, boolean, timestamptz) IS
    'Internal: the failure a held run stops with now: deadline_exceeded, or (gated: begin_turn) budget_exhausted by its own budget or an ancestor''s; NULL when neither applies.';

COMMIT;
