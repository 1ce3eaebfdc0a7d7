-- Deploy runq:function_complete_and_claim to pg
-- requires: function__wake_parents
-- requires: type_completed_and_claimed
-- requires: function_complete
-- requires: function_claim
-- requires: argument_checks
-- requires: function__refuse
-- requires: function__checkpoint_state
-- requires: function__inputs_after
-- requires: function__usage_totals
-- requires: table_settings
-- requires: table_limit_settings
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: function__notify_watchers

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers: a run finished and the next taken in one round trip and
-- one transaction, where runq.complete then runq.claim take two of each.
-- It is those two calls, in that order, so each rule is theirs: the
-- completion is fenced as complete's (false, one run.fenced), a slot it
-- frees under a limit is handed on before the claim looks, and the claim
-- takes what claim would. A fenced completion claims nothing unless
-- claim_if_fenced: a worker that lost a run may have lost its lease to a
-- pause of its whole process, and is asked to look before it takes more.
-- A NULL run_id and epoch complete nothing (a worker loop's first call).
-- The claim's arguments are tested first, so a bad one changes nothing.
--
-- The usual call (a run given, no kinds, no concurrency limit set) takes a
-- fast path: the completion and the claim are one UPDATE of runs and one
-- INSERT of their events. A cycle's cost is per statement and per index of
-- runs (executor start-up, the 17 indexes opened and their predicates
-- compiled, the run-shape CHECK parsed again), not per row: one statement
-- for both rows costs 0.81 of the instructions of complete then claim (19 %
-- fewer) and 0.72 of the one-call version before it (bench/instructions.py
-- --one-call; docs/performance/history.md, "One call a cycle"). Its rules are complete's and claim's: the run given
-- is locked first and must be running under epoch (else nothing is claimed
-- here and the slow path reports the fencing), the claim picks and sets as
-- runq.claim's statement does (keep the two alike), and a claim that comes
-- back short asks runq.claim for the rest, which marks the workers idle and
-- swaps parked runs in as it always does. With a limit set, the slot the
-- completion frees must be handed on before the claim looks: the two calls.
CREATE OR REPLACE FUNCTION runq.complete_and_claim(
    run_id          bigint,
    epoch           bigint,
    result          jsonb,
    classes         integer[],
    worker_id       text     DEFAULT NULL,
    lease           interval DEFAULT NULL,
    max_runs        integer  DEFAULT 1,
    kinds           text[]   DEFAULT NULL,
    claim_if_fenced boolean  DEFAULT false)
    RETURNS SETOF runq.completed_and_claimed
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- As runq.claim's: the fast path's statement is planned once per session
    -- (a custom plan of it, with runs of 200,000 rows, was past
    -- jit_above_cost and ran slower than two calls), and never compiled.
    SET plan_cache_mode = force_generic_plan
    SET jit = off
AS $$
DECLARE
    v_now       timestamptz := clock_timestamp();
    v_completed boolean;
    v_got       bigint := 0::bigint;
    v_none      runq.completed_and_claimed;
BEGIN
    IF NOT coalesce(runq._is_classes(complete_and_claim.classes)
                    AND runq._is_count(complete_and_claim.max_runs)
                    AND runq._is_duration(complete_and_claim.lease)
                    AND (complete_and_claim.kinds IS NULL OR runq._is_names(complete_and_claim.kinds)),
                    false) THEN
        PERFORM runq._check_classes('classes', complete_and_claim.classes)
            AND runq._check_count('max_runs', complete_and_claim.max_runs)
            AND runq._check_duration('lease', complete_and_claim.lease)
            AND (complete_and_claim.kinds IS NULL
                 OR runq._check_names('kinds', complete_and_claim.kinds));
    END IF;
    IF complete_and_claim.run_id IS NOT NULL AND complete_and_claim.epoch IS NOT NULL
       AND complete_and_claim.kinds IS NULL AND NOT EXISTS (SELECT FROM runq.limit_settings) THEN
        RETURN QUERY
        WITH held AS (
            SELECT r.run_id
              FROM runq.runs AS r
             WHERE r.run_id = complete_and_claim.run_id
               AND r.status = 'running' AND r.lease_epoch = complete_and_claim.epoch  -- fence
               -- A run with a family (child runs) takes runq.complete below.
               AND r.parent_run_id IS NULL AND r.spawned IS NULL
               FOR UPDATE
        ), picked AS (
            -- runq.claim's pick, and only once the run given is held.
            SELECT r.run_id
              FROM runq.runs AS r
             WHERE r.status = 'queued' AND NOT r.parked
               AND r.priority = ANY (complete_and_claim.classes)
               AND r.ready_at <= v_now
               AND EXISTS (SELECT FROM held)
             ORDER BY r.priority, r.ready_at, r.run_id
             LIMIT complete_and_claim.max_runs
               FOR UPDATE SKIP LOCKED
        ), chosen AS (
            SELECT coalesce(complete_and_claim.lease, (SELECT s.lease FROM runq.settings AS s)) AS lease
        ), changed AS (
            -- The run given is the one that is running; the others are claimed.
            UPDATE runq.runs AS r
               SET status = CASE WHEN r.status = 'running' THEN 'succeeded' ELSE 'running' END,
                   result = CASE WHEN r.status = 'running' THEN complete_and_claim.result
                                 ELSE r.result END,
                   lease_epoch = CASE WHEN r.status = 'running' THEN r.lease_epoch
                                      ELSE r.lease_epoch + 1 END,
                   attempts = CASE WHEN r.status = 'running' THEN r.attempts ELSE r.attempts + 1 END,
                   lease_owner = CASE WHEN r.status = 'running' THEN r.lease_owner
                                      ELSE complete_and_claim.worker_id END,
                   lease = CASE WHEN r.status = 'running' THEN r.lease ELSE l.lease END,
                   heartbeat_at = CASE WHEN r.status = 'running' THEN r.heartbeat_at ELSE v_now END,
                   lease_expires_at = CASE WHEN r.status = 'running' THEN NULL ELSE v_now + l.lease END,
                   finished_at = CASE WHEN r.status = 'running' THEN v_now ELSE r.finished_at END,
                   updated_at = v_now
              FROM chosen AS l
             WHERE r.run_id = ANY (ARRAY(SELECT h.run_id FROM held AS h
                                         UNION ALL SELECT p.run_id FROM picked AS p))
            RETURNING r.run_id, r.status, r.lease_epoch, r.tenant_id, r.session_id, r.kind,
                      r.priority, r.payload, r.attempts, r.last_checkpoint,
                      r.ready_at, r.lease_expires_at, r.deadline, r.budget, r.watched
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT c.run_id, c.lease_epoch,
                   CASE WHEN c.status = 'succeeded' THEN 'run.succeeded' ELSE 'run.claimed' END,
                   CASE WHEN c.status = 'succeeded' THEN '{}'::jsonb
                        ELSE jsonb_build_object('worker_id', complete_and_claim.worker_id,
                                                'attempt', c.attempts) END,
                   v_now
              FROM changed AS c
             -- The run completed notifies its watchers, if any (runq.complete).
             WHERE c.watched IS NOT TRUE OR c.status <> 'succeeded'
                OR runq._notify_watchers(ARRAY[c.run_id])
        )
        -- runq.claim's result, after true.
        SELECT true, c.run_id, c.lease_epoch::bigint, c.tenant_id::text, c.session_id::text,
               c.kind::text, c.priority::integer, c.payload::jsonb, c.attempts::integer,
               CASE WHEN c.lease_epoch > 1
                    THEN runq._checkpoint_state(c.run_id, c.last_checkpoint) END,
               CASE WHEN c.lease_epoch > 1
                    THEN runq._inputs_after(c.run_id, c.last_checkpoint) ELSE '[]' END,
               c.lease_epoch > 1, c.lease_expires_at, c.deadline, c.budget,
               CASE WHEN c.lease_epoch > 1 THEN runq._usage_totals(c.run_id) ELSE '{}' END
          FROM changed AS c
         WHERE c.status = 'running'
         ORDER BY c.priority, c.ready_at, c.run_id;
        GET DIAGNOSTICS v_got = ROW_COUNT;
        IF v_got = complete_and_claim.max_runs THEN
            RETURN;
        END IF;
        -- Short, or nothing held: did this call complete the run? (It holds
        -- its row lock, so nothing else changed it since.)
        v_completed := v_got > 0 OR EXISTS (
            SELECT FROM runq.runs AS r
             WHERE r.run_id = complete_and_claim.run_id AND r.status = 'succeeded'
               AND r.lease_epoch = complete_and_claim.epoch AND r.finished_at = v_now);
        IF NOT v_completed THEN
            IF EXISTS (SELECT FROM runq.runs AS r
                        WHERE r.run_id = complete_and_claim.run_id
                          AND (r.parent_run_id IS NOT NULL OR r.spawned IS NOT NULL)) THEN
                -- A run with a family, whose end cancels its children or
                -- wakes its parent: runq.complete (or its fence) decides.
                v_completed := runq.complete(complete_and_claim.run_id, complete_and_claim.epoch,
                                             complete_and_claim.result);
            ELSE
                -- Fenced: one run.fenced and false, as complete; RQ003 for no such run.
                v_completed := runq._refuse(complete_and_claim.run_id, complete_and_claim.epoch,
                                            'complete', false);
            END IF;
        END IF;
    -- One of the two NULL: complete raises 22023 naming it.
    ELSIF complete_and_claim.run_id IS NOT NULL OR complete_and_claim.epoch IS NOT NULL THEN
        v_completed := runq.complete(complete_and_claim.run_id, complete_and_claim.epoch,
                                     complete_and_claim.result);
    END IF;
    IF v_completed OR v_completed IS NULL OR coalesce(complete_and_claim.claim_if_fenced, false) THEN
        RETURN QUERY
            SELECT v_completed, c.*
              FROM runq.claim(complete_and_claim.classes, complete_and_claim.worker_id,
                              complete_and_claim.lease,
                              complete_and_claim.max_runs - v_got::integer,
                              complete_and_claim.kinds) AS c;
        IF FOUND OR v_got > 0 THEN
            RETURN;
        END IF;
    END IF;
    -- Nothing claimed: one row all the same, to say what the completion did.
    v_none.completed := v_completed;
    RETURN NEXT v_none;
END
$$;

REVOKE ALL ON FUNCTION runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean)
    TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.complete_and_claim(bigint, bigint, jsonb, integer[], text, interval, integer, text[], boolean) IS
$c$runq.complete then runq.claim in one call and one transaction: the run run_id, held under epoch, succeeds with result, then up to max_runs runs of classes (and kinds) are claimed with worker_id and lease, as runq.claim claims them. One row per claimed run: completed (what runq.complete answered: true, or false when fenced, with one run.fenced), then runq.claim's columns. A fenced completion claims nothing unless claim_if_fenced. When nothing is claimed, one row: completed, and NULL in every other column. A NULL run_id and epoch complete nothing (completed NULL) and only claim.
Raises 22023 (the claim's arguments, as runq.claim; run_id or epoch NULL without the other), RQ003 (no such run); then nothing changes.$c$;

COMMIT;
