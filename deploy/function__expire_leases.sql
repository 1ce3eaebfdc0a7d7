-- Deploy runq:function__expire_leases to pg
-- requires: function__wake_parents
-- requires: table_runs
-- requires: table_run_events
-- requires: function__backoff
-- requires: function__resolve_tool_calls
-- requires: admission
-- requires: function__notify_watchers

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- The lease-expiry path, shared by runq.sweep (leases found expired) and
-- runq.release (a lease given back: released => true). The caller has locked
-- the runs, which are 'running'. For each run, in this order:
--   1. cancel requested                      -> cancelled
--   2. past its deadline                     -> failed, deadline_exceeded
--   3. attempts used up (not on release)     -> failed, max_attempts_exceeded
--   4. policy 'fail'                         -> failed, orphaned
--   5. policy 'zero_work': no turn, no tool call and inside queue_ttl
--                                            -> requeued at once; else orphaned
--   6. policy 'resume'                       -> requeued; the sweep backs off
--                                               least(cap, base * 2^(attempts-1)),
--                                               a release does not
-- A release gives back the attempt its claim took. Tool calls the dead epoch
-- left 'started' are resolved first, whatever the outcome.
--
-- The runs it moves call the admission functions when limits or pauses are
-- set (deploy/admission.sql).
-- A run past its deadline fails (deploy/stop_failures.sql).
CREATE OR REPLACE FUNCTION runq._expire_leases(run_ids bigint[], released boolean, at timestamptz)
    RETURNS TABLE(run_id bigint, action text)
    LANGUAGE plpgsql
    VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_spawned bigint[];
    v_parents bigint[];
BEGIN
    PERFORM runq._resolve_tool_calls(_expire_leases.run_ids, _expire_leases.at);

    RETURN QUERY
    WITH decided AS (
        SELECT r.run_id,
               CASE WHEN r.cancel_requested THEN 'cancelled'
                    WHEN r.deadline <= _expire_leases.at THEN 'deadline_exceeded'
                    WHEN NOT released AND r.attempts >= r.max_attempts THEN 'dead_lettered'
                    WHEN r.recovery_policy = 'fail' THEN 'orphaned'
                    WHEN r.recovery_policy = 'zero_work'
                         AND (r.turns > 0 OR r.tools_begun > 0
                              OR r.expires_at <= _expire_leases.at) THEN 'orphaned'
                    ELSE 'requeued'
               END AS action
          FROM runq.runs AS r
         WHERE r.run_id = ANY (_expire_leases.run_ids)
           AND r.status = 'running'
    ), applied AS (
        UPDATE runq.runs AS r
           SET status = CASE d.action WHEN 'requeued' THEN 'queued'
                                      WHEN 'cancelled' THEN 'cancelled'
                                      ELSE 'failed' END,
               attempts = r.attempts - CASE WHEN released THEN 1 ELSE 0 END,
               scheduled_for = CASE
                   WHEN d.action <> 'requeued' THEN r.scheduled_for
                   WHEN NOT released AND r.recovery_policy = 'resume'
                       THEN _expire_leases.at + runq._backoff(r.attempts)
                   ELSE NULL END,
               failure = CASE d.action
                   WHEN 'deadline_exceeded' THEN runq._stop_failure(r, false, _expire_leases.at)
                   WHEN 'dead_lettered' THEN jsonb_build_object(
                       'code', 'max_attempts_exceeded',
                       'message', format('lease expired on attempt %s of %s', r.attempts, r.max_attempts),
                       'attempt', r.attempts, 'epoch', r.lease_epoch, 'at', _expire_leases.at)
                   WHEN 'orphaned' THEN jsonb_build_object(
                       'code', 'orphaned',
                       'message', format('lease %s with recovery policy %s%s',
                                         CASE WHEN released THEN 'released' ELSE 'expired' END,
                                         r.recovery_policy,
                                         CASE WHEN r.recovery_policy = 'fail' THEN ''
                                              WHEN r.turns > 0 OR r.tools_begun > 0
                                                  THEN ' after the run did work'
                                              ELSE ' past its queue_ttl' END),
                       'attempt', r.attempts, 'epoch', r.lease_epoch, 'at', _expire_leases.at)
                   END,
               finished_at = CASE WHEN d.action <> 'requeued' THEN _expire_leases.at END,
               lease_expires_at = NULL,
               updated_at = _expire_leases.at
          FROM decided AS d
         WHERE r.run_id = d.run_id
        RETURNING r.run_id, r.lease_epoch, d.action, r.failure, r.scheduled_for, r.watched
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT a.run_id, a.lease_epoch,
               CASE a.action WHEN 'requeued' THEN 'run.requeued'
                             WHEN 'cancelled' THEN 'run.cancelled'
                             ELSE 'run.failed' END,
               CASE a.action
                   WHEN 'requeued' THEN jsonb_build_object(
                       'reason', CASE WHEN released THEN 'released' ELSE 'lease_expired' END,
                       'scheduled_for', a.scheduled_for)
                   WHEN 'cancelled' THEN jsonb_build_object('reason', 'cancel_requested')
                   ELSE a.failure END,
               _expire_leases.at
          FROM applied AS a
         ORDER BY a.run_id
    )
    -- A run that ended and is watched notifies its watchers (runq._notify_watchers).
    SELECT a.run_id, a.action
      FROM applied AS a
     WHERE a.watched IS NOT TRUE OR a.action = 'requeued' OR runq._notify_watchers(ARRAY[a.run_id])
     ORDER BY a.run_id;

    IF FOUND THEN
        -- Wake idle workers for what just became claimable. One payload-less
        -- notification per transaction: NOTIFY folds duplicates.
        PERFORM pg_notify('runq', '');
        -- With limits or pauses set (deploy/admission.sql): a requeued run
        -- keeps its slot unless a pause or a lowered limit's debt parks it;
        -- a run that ended leaves its slot to the next. The runs this call
        -- updated are those it stamped with at.
        IF EXISTS (SELECT FROM runq.limit_settings) OR EXISTS (SELECT FROM runq.pause_settings) THEN
            PERFORM runq._requeued(r.run_id, true)
               FROM runq.runs AS r
              WHERE r.run_id = ANY (_expire_leases.run_ids) AND r.updated_at = _expire_leases.at
                AND r.status = 'queued';
            PERFORM runq._slot_left(r.tenant_id, r.kind)
               FROM runq.runs AS r
              WHERE r.run_id = ANY (_expire_leases.run_ids) AND r.updated_at = _expire_leases.at
                AND r.status IN ('failed', 'cancelled');
        END IF;
        -- The runs that ended with a family (child runs): their live
        -- children are cancelled; a parent waiting for them may be done.
        SELECT array_agg(r.run_id) FILTER (WHERE r.spawned IS NOT NULL),
               array_agg(r.parent_run_id) FILTER (WHERE r.parent_run_id IS NOT NULL)
          INTO v_spawned, v_parents
          FROM runq.runs AS r
         WHERE r.run_id = ANY (_expire_leases.run_ids) AND r.updated_at = _expire_leases.at
           AND r.status IN ('failed', 'cancelled')
           AND (r.spawned IS NOT NULL OR r.parent_run_id IS NOT NULL);
        PERFORM runq._family_ended(v_spawned, v_parents, _expire_leases.at);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION runq._expire_leases(bigint[], boolean, timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._expire_leases(bigint[], boolean, timestamptz) IS
    'Internal: applies the lease-expiry rules to locked running runs; returns each run''s action.';

COMMIT;
