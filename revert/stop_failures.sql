-- Revert runq:stop_failures from pg
-- (back to the budget gate of v0.2.0: a run's own budget only)

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
SET LOCAL search_path = pg_catalog, pg_temp;

-- The v0.2.0 definitions; runq._ancestor_overrun goes once nothing calls it.
CREATE OR REPLACE FUNCTION runq._budget_overrun(run_id bigint, budget jsonb)
    RETURNS jsonb
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT jsonb_build_object('key', b.key, 'limit', b.value,
                                      'total', coalesce(u.usage -> b.key, '0'::jsonb))
              FROM jsonb_each(_budget_overrun.budget) WITH ORDINALITY AS b (key, value, n)
              LEFT JOIN runq.run_usage AS u ON u.run_id = _budget_overrun.run_id
             WHERE runq._is_reached(u.usage -> b.key, b.value)
             ORDER BY b.n
             LIMIT 1);
END
$$;

-- Why a held run must stop now, as its failure, deadline first: its deadline
-- has passed (deadline_exceeded) or, for a gated call (begin_turn), a total
-- has reached its budget (budget_exhausted); NULL when neither. A cancel
-- flag comes before both, and is its callers' to test.
--
-- A body in a string, not BEGIN ATOMIC: a standard body that reads the row
-- type of runq.runs would forbid every later ALTER TABLE of runs.
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
                       'message', format('%s reached %s of its budget of %s',
                                         o.overrun ->> 'key', o.overrun -> 'total', o.overrun -> 'limit'),
                       'attempt', (run).attempts, 'epoch', (run).lease_epoch, 'at', at)
                   || o.overrun
              FROM (SELECT runq._budget_overrun((run).run_id, (run).budget)) AS o (overrun)
             WHERE o.overrun IS NOT NULL)
    END
$$;


COMMENT ON FUNCTION runq._budget_overrun(bigint, jsonb) IS
    'Internal: {key, limit, total} of the first key of a run''s budget whose total (runq.run_usage) reached its limit, or NULL.';
COMMENT ON FUNCTION runq._stop_failure(runq.runs, boolean, timestamptz) IS
    'Internal: the failure a held run stops with now: deadline_exceeded, or (gated: begin_turn) budget_exhausted; NULL when neither applies.';

DROP FUNCTION runq._ancestor_overrun(bigint);

COMMIT;
