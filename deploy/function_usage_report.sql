-- Deploy runq:function_usage_report to pg
-- requires: index_run_events_usage
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Read-only: what was spent in [since, until), per tenant and kind, from the
-- ledger (the run.usage events, fenced epochs' included), not from the runs'
-- totals, which have no time. The window is read from run_events_usage_idx;
-- each run's tenant and kind by its primary key. No JIT: the planner takes
-- jsonb_each for 100 keys where usage has a few, so an hour of a busy ledger
-- (20,000 events) crossed the JIT thresholds and each call (a metrics scrape)
-- spent 420 ms compiling a 40 ms query.
CREATE FUNCTION runq.usage_report(since timestamptz, until timestamptz DEFAULT NULL)
    RETURNS TABLE(tenant_id text, kind text, runs bigint, usage jsonb)
    LANGUAGE plpgsql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF usage_report.since IS NULL OR NOT isfinite(usage_report.since) THEN
        PERFORM runq._bad_argument('since', 'a finite time', usage_report.since);
    END IF;
    IF usage_report.until <= usage_report.since THEN
        PERFORM runq._bad_argument('until', format('NULL or after since (%s)', usage_report.since),
                                   usage_report.until);
    END IF;
    RETURN QUERY
    WITH spent AS (
        SELECT r.tenant_id::text AS tenant_id, r.kind::text AS kind, e.run_id, u.key,
               u.value::numeric AS amount
          FROM runq.run_events AS e
          JOIN runq.runs AS r ON r.run_id = e.run_id
         CROSS JOIN LATERAL jsonb_each(e.payload) AS u
         WHERE e.type = 'run.usage'
           AND e.created_at >= usage_report.since
           AND (usage_report.until IS NULL OR e.created_at < usage_report.until)
    ), per_key AS (
        SELECT s.tenant_id, s.kind, s.key, sum(s.amount) AS total
          FROM spent AS s
         GROUP BY s.tenant_id, s.kind, s.key
    ), keyed AS (
        SELECT k.tenant_id, k.kind, jsonb_object_agg(k.key, k.total ORDER BY k.key) AS usage
          FROM per_key AS k
         GROUP BY k.tenant_id, k.kind
    ), per_run AS (
        SELECT s.tenant_id, s.kind, count(DISTINCT s.run_id) AS runs
          FROM spent AS s
         GROUP BY s.tenant_id, s.kind
    )
    SELECT p.tenant_id, p.kind, p.runs, k.usage
      FROM per_run AS p
      JOIN keyed AS k ON k.tenant_id = p.tenant_id AND k.kind = p.kind
     ORDER BY p.tenant_id, p.kind;
END
$$;

REVOKE ALL ON FUNCTION runq.usage_report(timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.usage_report(timestamptz, timestamptz) TO runq_admin;

COMMENT ON FUNCTION runq.usage_report(timestamptz, timestamptz) IS
$c$Usage recorded in [since, until) (until NULL: up to now), per tenant and kind, from the ledger of run.usage events, fenced epochs included: runs is how many runs recorded any, usage the exact sum of each key. Ordered by tenant_id, kind; reads only.
Raises 22023 (since NULL or not finite, until not after since).$c$;

COMMIT;
