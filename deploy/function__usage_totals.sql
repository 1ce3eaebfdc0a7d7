-- Deploy runq:function__usage_totals to pg
-- requires: table_run_usage

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- A function, not a subquery, where a statement reads one run's totals only
-- on some paths (claim for a resumed run, begin_turn for a run with a
-- budget): a subquery's plan is started by every execution of its statement,
-- a function call only when it is reached.
CREATE FUNCTION runq._usage_totals(run_id bigint)
    RETURNS jsonb
    LANGUAGE sql
    STABLE
    PARALLEL SAFE
RETURN coalesce((SELECT u.usage FROM runq.run_usage AS u WHERE u.run_id = _usage_totals.run_id),
                '{}'::jsonb);

REVOKE ALL ON FUNCTION runq._usage_totals(bigint) FROM PUBLIC;

COMMENT ON FUNCTION runq._usage_totals(bigint) IS
    'Internal: the usage totals of a run, {} when it recorded none.';

COMMIT;
