-- Deploy runq:function_complete_many to pg
-- requires: function__wake_parents
-- requires: table_runs
-- requires: table_run_events
-- requires: function__answer_batch
-- requires: admission
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: function__notify_watchers

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Several completions of a worker in one round trip and one statement: each
-- element is runq.complete's fenced update and its run.succeeded event, and
-- runq._answer_batch answers the elements as runq.complete would. unnest pads
-- a NULL results with NULLs: a NULL result for each run, as complete's default.
--
-- Runs that leave their slots hand them on when a concurrency limit is set
-- (runq._slot_left, deploy/admission.sql).
CREATE OR REPLACE FUNCTION runq.complete_many(run_ids bigint[], epochs bigint[], results jsonb[] DEFAULT NULL)
    RETURNS TABLE(run_id bigint, completed boolean)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_done    bigint[];
    v_parents bigint[];
    v_spawned bigint[];
BEGIN
    WITH done AS (
        UPDATE runq.runs AS r
           SET status = 'succeeded', result = c.result,
               lease_expires_at = NULL, finished_at = v_now, updated_at = v_now
          FROM unnest(complete_many.run_ids, complete_many.epochs, complete_many.results)
                   AS c(run_id, epoch, result)
         WHERE r.run_id = c.run_id
           AND r.status = 'running' AND r.lease_epoch = c.epoch  -- fence
           AND r.parent_run_id IS NULL  -- a child: runq.complete, below
        RETURNING r.run_id, r.lease_epoch, r.tenant_id, r.kind, r.watched,
                  r.parent_run_id, r.spawned
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now
          FROM done AS d
    )
    -- Each run's slot is handed on (runq._slot_left) only when a debt or a
    -- parked run of one of its keys may be waiting for it, one run after the
    -- other: a hand-on counts nothing, so the rows of one statement cannot
    -- give one slot twice. The same gate as in runq.complete.
    -- A watched run (runs.watched) notifies its watchers
    -- (runq._notify_watchers); one nobody watches pays a test of the flag.
    -- The runs' families (child runs) are read from the rows updated.
    SELECT array_agg(d.run_id),
           array_agg(d.parent_run_id) FILTER (WHERE d.parent_run_id IS NOT NULL),
           array_agg(d.run_id) FILTER (WHERE d.spawned IS NOT NULL)
      INTO v_done, v_parents, v_spawned
      FROM done AS d
     WHERE (d.watched IS NOT TRUE OR runq._notify_watchers(ARRAY[d.run_id]))
       AND (NOT EXISTS (SELECT FROM runq.limit_settings)
        OR NOT (EXISTS (SELECT FROM runq.limit_debts)
                OR EXISTS (SELECT FROM runq.limit_settings AS l WHERE l.scope = 'tenant')
                   AND EXISTS (SELECT FROM runq.runs AS p
                                WHERE p.parked AND p.status = 'queued' AND p.tenant_id = d.tenant_id)
                OR EXISTS (SELECT FROM runq.limit_settings AS l WHERE l.scope = 'kind')
                   AND EXISTS (SELECT FROM runq.runs AS p
                                WHERE p.parked AND p.status = 'queued' AND p.kind = d.kind))
        OR runq._slot_left(d.tenant_id, d.kind));
    -- Their live children are cancelled; a parent waiting for them may be
    -- done waiting.
    IF v_spawned IS NOT NULL OR v_parents IS NOT NULL THEN
        PERFORM runq._family_ended(v_spawned, v_parents, v_now);
    END IF;
    -- A child run is completed by runq.complete, which locks its parent first
    -- (the lock order it explains). Only a batch that was
    -- not all completed above looks for one.
    IF coalesce(cardinality(v_done), 0) < cardinality(complete_many.run_ids) THEN
        v_done := coalesce(v_done, '{}') || ARRAY(
            SELECT c.run_id
              FROM unnest(complete_many.run_ids, complete_many.epochs, complete_many.results)
                       WITH ORDINALITY AS c(run_id, epoch, result, n)
             -- CASE: the test first, so that no other run meets runq.complete
             WHERE CASE WHEN EXISTS (SELECT FROM runq.runs AS r
                                      WHERE r.run_id = c.run_id AND r.parent_run_id IS NOT NULL
                                        AND r.status = 'running' AND r.lease_epoch = c.epoch)
                        THEN runq.complete(c.run_id, c.epoch, c.result) ELSE false END
             ORDER BY c.n);
    END IF;
    RETURN QUERY SELECT a.run_id, a.applied
                   FROM runq._answer_batch(complete_many.run_ids, complete_many.epochs,
                                           complete_many.results, v_done, 'complete', false) AS a;
END
$$;

REVOKE ALL ON FUNCTION runq.complete_many(bigint[], bigint[], jsonb[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.complete_many(bigint[], bigint[], jsonb[]) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.complete_many(bigint[], bigint[], jsonb[]) IS
$c$runq.complete for many runs in one statement: the run run_ids[i] under epochs[i] succeeds with results[i] (NULL results: a NULL result for each), one row per element in the order given. completed is what runq.complete would return for it: true, or false when that run is fenced (one run.fenced event).
Raises 22023 (NULL run_ids or epochs, arrays of different lengths, a NULL run_id or epoch, a run_id given twice), RQ003 (no such run, named; the whole call then changes nothing).$c$;

COMMIT;
