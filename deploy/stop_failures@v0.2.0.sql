-- Deploy runq:stop_failures to pg
-- requires: column_runs_budget
-- requires: table_run_usage
-- requires: columns_runs_deadline

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
SET LOCAL search_path = pg_catalog, pg_temp;

-- The budget rule, one definition for begin_turn's gate and for the failure
-- that names the key: a total has reached its limit (a key not yet spent
-- counts 0). A SQL-standard body, inlined into the statements that use it.
CREATE FUNCTION runq._is_reached(total jsonb, budget_limit jsonb)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN coalesce(total::numeric, 0) >= budget_limit::numeric;

-- The first key of a run's budget whose total (runq.run_usage) has reached
-- its limit (usage[k] >= budget[k], a key not yet spent counting 0), as
-- {key, limit, total}; NULL when none has, or there is no budget. The keys
-- in jsonb's own order, so the key named is the same on every call.
-- Only a run that stops calls it: begin_turn's gate is runq._is_reached
-- written into its own statement (a call of this costs a turn 5 %).
CREATE FUNCTION runq._budget_overrun(run_id bigint, budget jsonb)
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
CREATE FUNCTION runq._stop_failure(run runq.runs, gated boolean, at timestamptz)
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

REVOKE ALL ON FUNCTION runq._is_reached(jsonb, jsonb), runq._budget_overrun(bigint, jsonb),
                       runq._stop_failure(runq.runs, boolean, timestamptz)
    FROM PUBLIC;

COMMENT ON FUNCTION runq._is_reached(jsonb, jsonb) IS
    'Internal: whether a usage total (NULL: nothing spent) has reached its budget limit.';
COMMENT ON FUNCTION runq._budget_overrun(bigint, jsonb) IS
    'Internal: {key, limit, total} of the first key of a run''s budget whose total (runq.run_usage) reached its limit, or NULL.';
COMMENT ON FUNCTION runq._stop_failure(runq.runs, boolean, timestamptz) IS
    'Internal: the failure a held run stops with now: deadline_exceeded, or (gated: begin_turn) budget_exhausted; NULL when neither applies.';

COMMIT;
