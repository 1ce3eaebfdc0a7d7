-- Revert runq:function_sweep from pg
-- (back to sweep as v0.1.3 released it)
-- requires: table_runs
-- requires: index_runs_held
-- requires: index_runs_queue_expiry
-- requires: function__expire_leases
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called on a timer by worker pools and operators, from any number of
-- processes at once: every pick is FOR UPDATE SKIP LOCKED, so concurrent
-- sweepers split the work and a run is decided once. Up to max_runs runs in
-- all: first running runs whose lease has expired (oldest expiry first,
-- through runq._expire_leases), then queued runs past their queue_ttl.
-- Raises 22023 (max_runs NULL or below 1).
--
-- max_runs is checked by runq._check_count.
CREATE OR REPLACE FUNCTION runq.sweep(max_runs integer DEFAULT 1000)
    RETURNS TABLE(run_id bigint, action text)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_expired  bigint[];
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs them as one expression; a PERFORM
    -- would run them as a statement of its own.
    IF runq._check_count('max_runs', sweep.max_runs) THEN
    END IF;

    SELECT coalesce(array_agg(x.run_id), '{}') INTO v_expired
      FROM (SELECT r.run_id
              FROM runq.runs AS r
             WHERE r.status = 'running'
               AND r.lease_expires_at < v_now
             ORDER BY r.lease_expires_at, r.run_id
             LIMIT sweep.max_runs
               FOR UPDATE SKIP LOCKED) AS x;

    IF cardinality(v_expired) > 0 THEN
        RETURN QUERY SELECT e.run_id, e.action
                       FROM runq._expire_leases(v_expired, false, v_now) AS e;
    END IF;

    IF cardinality(v_expired) < sweep.max_runs THEN
        RETURN QUERY
        WITH overdue AS (
            SELECT r.run_id
              FROM runq.runs AS r
             WHERE r.status = 'queued'
               AND r.expires_at <= v_now
               -- a run requeued just above is decided for this sweep
               AND r.run_id <> ALL (v_expired)
             ORDER BY r.expires_at, r.run_id
             LIMIT sweep.max_runs - cardinality(v_expired)
               FOR UPDATE SKIP LOCKED
        ), expired AS (
            UPDATE runq.runs AS r
               SET status = 'failed',
                   failure = jsonb_build_object(
                       'code', 'queue_ttl_expired',
                       'message', format('queued longer than its queue_ttl of %s', r.queue_ttl),
                       'attempt', r.attempts, 'epoch', r.lease_epoch, 'at', v_now),
                   finished_at = v_now, updated_at = v_now
             -- an array, not a join, so no plan can hash all of runs
             WHERE r.run_id = ANY (ARRAY(SELECT o.run_id FROM overdue AS o))
            RETURNING r.run_id, r.lease_epoch, r.failure
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT x.run_id, x.lease_epoch, 'run.failed', x.failure, v_now
              FROM expired AS x
        )
        SELECT x.run_id, 'expired'::text FROM expired AS x ORDER BY x.run_id;
    END IF;
END
$$;

REVOKE ALL ON FUNCTION runq.sweep(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.sweep(integer) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.sweep(integer) IS
$c$Decide up to max_runs runs whose lease expired, and fail queued runs past their queue_ttl; safe to run from many processes at once. For each expired lease, in order: cancel requested -> cancelled; attempts >= max_attempts -> failed, max_attempts_exceeded (dead_lettered); policy fail -> failed, orphaned; policy zero_work -> requeued at once if the run did no turn and no tool call and is inside its queue_ttl, else orphaned; policy resume -> requeued after least(backoff_cap, backoff_base * 2^(attempts-1)). Tool calls left started become retryable or uncertain. Returns (run_id, action): requeued, dead_lettered, orphaned, cancelled or expired.
Raises 22023 (max_runs NULL or below 1).$c$;

COMMIT;
