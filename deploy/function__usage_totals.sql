-- Deploy runq:function__usage_totals to pg
-- requires: table_run_usage

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- For claim, which reads a resumed run's totals only: a function call is
-- made only when reached, where a subquery's plan is started by every
-- execution of the claim. PL/pgSQL, not SQL: a SQL function's query is
-- planned again on every call of the statement that calls it.
CREATE FUNCTION runq._usage_totals(run_id bigint)
    RETURNS jsonb
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT u.usage FROM runq.run_usage AS u WHERE u.run_id = _usage_totals.run_id),
                    '{}'::jsonb);
END
$$;

REVOKE ALL ON FUNCTION runq._usage_totals(bigint) FROM PUBLIC;

COMMENT ON FUNCTION runq._usage_totals(bigint) IS
    'Internal: the usage totals of a run, {} when it recorded none.';

COMMIT;
