-- Revert runq:function_record_usage from pg
-- (back to the version of v0.2.0)

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers after each model or tool call that cost something.
-- Spend is a fact, not a transition: it is added to the run's totals and
-- logged (run.usage, under the caller's epoch) whoever holds the run now,
-- also after the run finished. Only an epoch the run never had is refused:
-- no claim issued it, so no worker could have spent under it. One statement:
-- the run read (not written: KEY SHARE keeps purge from deleting it
-- meanwhile, and pickers that lock FOR UPDATE SKIP LOCKED step over it for
-- as long, as they did over the UPDATE of runs it replaced), its row of
-- runq.run_usage added to (the upsert's row lock
-- orders concurrent recorders, so the sums are exact), and the event. The
-- answer is the fence's, as of the statement's snapshot: false when the
-- caller no longer holds the run (one run.fenced).
CREATE OR REPLACE FUNCTION runq.record_usage(run_id bigint, epoch bigint, usage jsonb)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_held  boolean;
    v_epoch bigint;
BEGIN
    IF runq._check_usage('usage', record_usage.usage) THEN
    END IF;
    IF record_usage.epoch IS NULL THEN
        PERFORM runq._bad_argument('epoch', 'given', record_usage.epoch);
    END IF;

    WITH run AS (
        SELECT r.run_id, r.status = 'running' AND r.lease_epoch = record_usage.epoch AS held
          FROM runq.runs AS r
         WHERE r.run_id = record_usage.run_id
           AND record_usage.epoch BETWEEN 1 AND r.lease_epoch
           FOR KEY SHARE
    ), added AS (
        INSERT INTO runq.run_usage AS t (run_id, usage)
        SELECT run.run_id, record_usage.usage FROM run
            ON CONFLICT ON CONSTRAINT run_usage_pkey DO UPDATE
           SET usage = t.usage || (SELECT jsonb_object_agg(u.key, coalesce((t.usage -> u.key)::numeric, 0)
                                                                  + u.value::numeric)
                                     FROM jsonb_each(excluded.usage) AS u)
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT run.run_id, record_usage.epoch, 'run.usage', record_usage.usage, v_now
          FROM run
    )
    SELECT run.held INTO v_held FROM run;
    IF NOT FOUND THEN
        SELECT r.lease_epoch::bigint INTO v_epoch FROM runq.runs AS r WHERE r.run_id = record_usage.run_id;
        IF NOT FOUND THEN
            PERFORM runq._run_not_found(record_usage.run_id);
        END IF;
        PERFORM runq._bad_argument('epoch',
            CASE WHEN v_epoch = 0 THEN format('an epoch run %s was claimed with (it never was)', record_usage.run_id)
                 ELSE format('an epoch run %s was claimed with, 1 to %s', record_usage.run_id, v_epoch) END,
            record_usage.epoch);
    END IF;

    IF v_held THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(record_usage.run_id, record_usage.epoch, 'record_usage', false);
END
$$;

REVOKE ALL ON FUNCTION runq.record_usage(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.record_usage(bigint, bigint, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.record_usage(bigint, bigint, jsonb) IS
$c$Record what a model or tool call of the run spent: usage is an object of non-negative numbers, e.g. {"input_tokens": 1200, "output_tokens": 310, "cost_usd": 0.0123} (keys are free). Each value is added to the run's totals (exact numeric sums; runq.get_run and runq.claim show them as usage) and one run.usage event (payload: usage) is logged under epoch. Recorded even from a fenced epoch, and after the run finished, for any epoch the run was claimed with: spend is a fact whoever holds the run now. Not stopped by a cancel flag, the deadline or the budget. Returns true when the run is running under epoch, else false (fenced: one run.fenced event).
Raises 22023 (usage not a non-empty object of non-negative numbers, NULL run_id or epoch, an epoch the run never had: 0, negative or above its current one), RQ003 (no such run).$c$;

COMMIT;
