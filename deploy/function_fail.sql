-- Deploy runq:function_fail to pg
-- requires: function__wake_parents
-- requires: table_runs
-- requires: table_run_events
-- requires: admission
-- requires: function__refuse
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: function__notify_watchers

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers for a permanent failure: the run goes to the dead letter
-- at once and the queue never retries it. The stored failure always has code,
-- message (the code when absent), attempt, epoch and at.
-- Raises 22023 (failure not an object with a string code), RQ003.
--
-- A run that leaves its slot hands it on when a concurrency limit is set
-- (runq._slot_left, deploy/admission.sql).
CREATE OR REPLACE FUNCTION runq.fail(run_id bigint, epoch bigint, failure jsonb)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_done    boolean;
    v_parent  bigint;
    v_spawned boolean;
    v_family  boolean := false;
BEGIN
    IF fail.failure IS NULL OR jsonb_typeof(fail.failure) <> 'object'
       OR jsonb_typeof(fail.failure -> 'code') IS DISTINCT FROM 'string'
       OR jsonb_typeof(fail.failure -> 'message') NOT IN ('string', 'null') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('failure must be a jsonb object with a string code (and a string message, if any), got %s',
                             coalesce(left(fail.failure::text, 200), 'NULL'));
    END IF;

    <<attempt>>
    LOOP
        WITH failed AS (
            UPDATE runq.runs AS r
               SET status = 'failed',
                   failure = fail.failure
                             || jsonb_build_object(
                                    'message', coalesce(fail.failure ->> 'message', fail.failure ->> 'code'),
                                    'attempt', r.attempts, 'epoch', r.lease_epoch, 'at', v_now),
                   lease_expires_at = NULL, finished_at = v_now, updated_at = v_now
             WHERE r.run_id = fail.run_id
               AND r.status = 'running' AND r.lease_epoch = fail.epoch  -- fence
               AND (r.parent_run_id IS NULL OR v_family)  -- a child: its parent first, below
            RETURNING r.run_id, r.lease_epoch, r.failure, r.tenant_id, r.kind, r.watched,
                      r.parent_run_id, r.spawned
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT f.run_id, f.lease_epoch, 'run.failed', f.failure, v_now
              FROM failed AS f
        )
        -- The run's slot is handed on when a limit is set (runq._slot_left).
        -- A watched run (runs.watched) notifies its watchers
        -- (runq._notify_watchers); one nobody watches pays a test of the flag.
        -- Its family (child runs) is read from the row updated.
        SELECT true, f.parent_run_id, f.spawned IS NOT NULL INTO v_done, v_parent, v_spawned
          FROM failed AS f
         WHERE (f.watched IS NOT TRUE OR runq._notify_watchers(ARRAY[f.run_id]))
           AND (NOT EXISTS (SELECT FROM runq.limit_settings) OR runq._slot_left(f.tenant_id, f.kind));
        IF v_done THEN
            -- Its live children are cancelled; a parent waiting for it may be
            -- done waiting.
            IF v_spawned OR v_parent IS NOT NULL THEN
                PERFORM runq._family_ended(CASE WHEN v_spawned THEN ARRAY[fail.run_id] END,
                                           CASE WHEN v_parent IS NOT NULL THEN ARRAY[v_parent] END, v_now);
            END IF;
            RETURN true;
        END IF;
        -- A child run ends only once its parent is locked: the lock order of
        -- runq._cancel_children, a run before its children, which every
        -- function that ends a run keeps, so that two of them never wait for
        -- each other. A run without a parent pays the test in the statement.
        EXIT attempt WHEN v_family
            OR NOT EXISTS (SELECT FROM runq.runs AS r
                            WHERE r.run_id = fail.run_id AND r.parent_run_id IS NOT NULL);
        PERFORM runq._lock_parents(ARRAY[fail.run_id]);
        v_family := true;
    END LOOP;
    RETURN runq._refuse(fail.run_id, fail.epoch, 'fail', false);
END
$$;

REVOKE ALL ON FUNCTION runq.fail(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.fail(bigint, bigint, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.fail(bigint, bigint, jsonb) IS
$c$Fail a run this worker holds under epoch, permanently: it goes to the dead letter (status failed) and is never retried by the queue; runq.redrive brings it back. failure is an object with a string code and optionally a message; attempt, epoch and at are added. Returns true, or false when fenced.
Raises 22023 (NULL run_id or epoch, a failure that is not an object with a string code), RQ003 (no such run).$c$;

COMMIT;
