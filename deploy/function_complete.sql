-- Deploy runq:function_complete to pg
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

-- Called by workers. One statement: the fenced update to 'succeeded' and its
-- event. Applies even when cancel was requested: the work is done, and the
-- log should say so. Raises RQ003; returns false when fenced.
--
-- A run that leaves its slot hands it on when a concurrency limit is set
-- (runq._slot_left, deploy/admission.sql).
CREATE OR REPLACE FUNCTION runq.complete(run_id bigint, epoch bigint, result jsonb DEFAULT NULL)
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
    <<attempt>>
    LOOP
        WITH done AS (
            UPDATE runq.runs AS r
               SET status = 'succeeded', result = complete.result,
                   lease_expires_at = NULL, finished_at = v_now, updated_at = v_now
             WHERE r.run_id = complete.run_id
               AND r.status = 'running' AND r.lease_epoch = complete.epoch  -- fence
               AND (r.parent_run_id IS NULL OR v_family)  -- a child: its parent first, below
            RETURNING r.run_id, r.lease_epoch, r.tenant_id, r.kind, r.watched,
                      r.parent_run_id, r.spawned
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now
              FROM done AS d
        )
        -- The run's slot is handed on (runq._slot_left) only when a debt or a
        -- parked run of one of its keys may be waiting for it: a queue without
        -- limits pays one probe of runq.limit_settings, and one whose limits are
        -- not reached a few more, in this statement, not a call of a function
        -- (~50 us a run). The same gate as in runq.complete_many.
        -- A watched run (runs.watched) notifies its watchers
        -- (runq._notify_watchers); one nobody watches pays a test of the flag.
        -- Its family (child runs) is read from the row updated: a run with none
        -- pays a test of two columns.
        SELECT true, d.parent_run_id, d.spawned IS NOT NULL INTO v_done, v_parent, v_spawned
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
        IF v_done THEN
            -- Its live children are cancelled; a parent waiting for it may be
            -- done waiting.
            IF v_spawned OR v_parent IS NOT NULL THEN
                PERFORM runq._family_ended(CASE WHEN v_spawned THEN ARRAY[complete.run_id] END,
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
                            WHERE r.run_id = complete.run_id AND r.parent_run_id IS NOT NULL);
        PERFORM runq._lock_parents(ARRAY[complete.run_id]);
        v_family := true;
    END LOOP;
    RETURN runq._refuse(complete.run_id, complete.epoch, 'complete', false);
END
$$;

REVOKE ALL ON FUNCTION runq.complete(bigint, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.complete(bigint, bigint, jsonb) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.complete(bigint, bigint, jsonb) IS
$c$Mark a run this worker holds under epoch succeeded, with an optional result. Returns true, or false when fenced (the run is no longer running under this epoch; nothing changes but one run.fenced event).
Raises 22023 (NULL run_id or epoch), RQ003 (no such run).$c$;

COMMIT;
