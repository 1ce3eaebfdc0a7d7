-- Deploy runq:function_claim to pg
-- requires: table_runs
-- requires: index_runs_claimable
-- requires: index_runs_claimable_kind
-- requires: table_run_events
-- requires: function__checkpoint_state
-- requires: function__inputs_after
-- requires: table_settings
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks
-- requires: function__swap_in
-- requires: index_runs_parked
-- requires: column_runs_budget
-- requires: function__usage_totals
-- requires: columns_runs_deadline
-- requires: wake_idle

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers. One statement picks up to max_runs ready runs of the
-- given classes (and, with kinds, of those kinds only), lowest class value
-- first, then oldest (FOR UPDATE SKIP LOCKED: contending workers step over
-- each other's rows instead of queueing on them), takes them with a new lease
-- epoch and one more attempt, and logs run.claimed. A first claim has no
-- checkpoint and no inputs, so it reads nothing else; a resumed run also reads
-- its newest checkpoint (one key lookup) and the inputs delivered after it,
-- once locked. Raises 22023 for bad arguments. Zero rows when nothing is ready.
--
-- The arguments are tested by the shared predicates, which the planner
-- inlines, and only when one fails named by the shared checks of
-- argument_checks: each rule is written once, and the messages read as
-- every other 22023 does.
--
-- It takes admitted runs only (NOT parked), from
-- runs_claimable_idx and runs_claimable_kind_idx, where a run parked for a
-- concurrency limit or a pause has no entry. That is all the claim does for
-- limits and pauses: every admitted run may be taken without exceeding one
-- (deploy/admission.sql), so it checks nothing and skips nothing. A claim
-- that finds fewer runs than it asked for, while runs of its classes are
-- parked, asks runq._swap_in for them once (a tenant's slots held by its own
-- runs of other classes or kinds) and looks again. Its rows end with the
-- run's deadline, budget and usage totals, so a worker knows its limits: a
-- new result type, so the function is dropped and created again (its grants
-- and comment with it, below). A first claim (epoch 1) has spent nothing yet:
-- only a resumed run's totals are read (runq.run_usage).
-- What squawk warns of cannot happen: every call resolves to the new one,
-- whose rows only gain columns at their end.
-- squawk-ignore ban-drop-function
DROP FUNCTION runq.claim(integer[], text, interval, integer, text[]);
CREATE FUNCTION runq.claim(
    classes    integer[],
    worker_id  text     DEFAULT NULL,
    lease      interval DEFAULT NULL,
    max_runs   integer  DEFAULT 1,
    kinds      text[]   DEFAULT NULL)
    RETURNS TABLE(run_id bigint, epoch bigint, tenant_id text, session_id text,
                  kind text, priority integer, payload jsonb, attempt integer,
                  checkpoint jsonb, inputs jsonb, resumed boolean,
                  lease_expires_at timestamptz, deadline timestamptz, budget jsonb,
                  usage jsonb)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- Plan the claim once per session, not once per call: the generic plan
    -- below is the right one for every argument (see the WHERE of claimed),
    -- and planning this statement costs more than running it. Its estimated
    -- cost (max_runs unknown) is past jit_above_cost; compiling it would take
    -- a hundred times longer than running it.
    SET plan_cache_mode = force_generic_plan
    SET jit = off
AS $$
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_wanted  integer := claim.max_runs;
    v_got     bigint;
    v_tried   boolean := false;
    v_idle    boolean := false;
BEGIN
    -- The rules, as the inlined predicates of deploy/argument_checks; when one
    -- fails, the checks raise 22023 naming the argument and its value. Only
    -- then: a check's message costs every claim that holds it.
    IF NOT coalesce(runq._is_classes(claim.classes) AND runq._is_count(claim.max_runs)
                    AND runq._is_duration(claim.lease), false) THEN
        PERFORM runq._check_classes('classes', claim.classes)
            AND runq._check_count('max_runs', claim.max_runs)
            AND runq._check_duration('lease', claim.lease);
    END IF;

    -- Two statements, not one with two branches: a claim of any kind (the hot
    -- path) then plans and starts exactly what it did before kinds existed.
    -- The shared tail (chosen, claimed, logged and the result) is written
    -- twice for that reason; keep the two copies alike.
    LOOP
    IF claim.kinds IS NULL THEN
        -- Any kind: one walk of runs_claimable_idx, the classes in order.
        RETURN QUERY
    WITH picked AS (
        SELECT r.run_id
          FROM runq.runs AS r
         WHERE r.status = 'queued' AND NOT r.parked
           AND r.priority = ANY (claim.classes)
           AND r.ready_at <= v_now
         ORDER BY r.priority, r.ready_at, r.run_id
         LIMIT v_wanted
           FOR UPDATE SKIP LOCKED
    ), chosen AS (
        -- The default lease is read inside this statement, not by one more,
        -- and as a scalar: runq.settings is never analyzed, and a join to it
        -- would be planned for hundreds of rows.
        SELECT coalesce(claim.lease, (SELECT s.lease FROM runq.settings AS s)) AS lease
    ), claimed AS (
        UPDATE runq.runs AS r
           SET status = 'running',
               lease_epoch = r.lease_epoch + 1,
               attempts = r.attempts + 1,
               lease_owner = claim.worker_id,
               lease = l.lease,
               heartbeat_at = v_now,
               lease_expires_at = v_now + l.lease,
               updated_at = v_now
          FROM chosen AS l
         -- An array, not a join: with max_runs unknown to a generic plan, a
         -- join to picked would be planned as a hash join over all of runs.
         WHERE r.run_id = ANY (ARRAY(SELECT p.run_id FROM picked AS p))
        RETURNING r.run_id, r.lease_epoch, r.tenant_id, r.session_id, r.kind,
                  r.priority, r.payload, r.attempts, r.last_checkpoint,
                  r.ready_at, r.lease_expires_at, r.deadline, r.budget
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT c.run_id, c.lease_epoch, 'run.claimed',
               jsonb_build_object('worker_id', claim.worker_id, 'attempt', c.attempts),
               v_now
          FROM claimed AS c
    )
    -- A resumed run's checkpoint and inputs are read by VOLATILE functions, each
    -- with a snapshot taken after this statement locked the run: this
    -- statement's own snapshot may predate an input delivered (or a
    -- checkpoint written) just before the row lock was taken.
    SELECT c.run_id, c.lease_epoch::bigint, c.tenant_id::text, c.session_id::text,
           c.kind::text, c.priority::integer, c.payload::jsonb, c.attempts::integer,
           CASE WHEN c.lease_epoch > 1
                THEN runq._checkpoint_state(c.run_id, c.last_checkpoint) END,
           CASE WHEN c.lease_epoch > 1
                THEN runq._inputs_after(c.run_id, c.last_checkpoint) ELSE '[]' END,
           c.lease_epoch > 1, c.lease_expires_at, c.deadline, c.budget,
           CASE WHEN c.lease_epoch > 1 THEN runq._usage_totals(c.run_id) ELSE '{}' END
      FROM claimed AS c
     ORDER BY c.priority, c.ready_at, c.run_id;
    ELSE
        -- kinds is tested here, off the claim of any kind.
        IF NOT coalesce(runq._is_names(claim.kinds), false) THEN
            PERFORM runq._check_names('kinds', claim.kinds);
        END IF;
        RETURN QUERY
    WITH picked AS (
        -- These kinds only: the oldest max_runs of each (class, kind) from
        -- runs_claimable_kind_idx, then the oldest max_runs of those. A walk of
        -- runs_claimable_idx would read every queued run of other kinds ahead.
        -- The runs a pair locked but the final LIMIT drops stay locked until
        -- this claim commits: a concurrent claim steps over them, as over any
        -- run another claim holds, and they keep their place.
        SELECT p.run_id
          FROM (SELECT DISTINCT c FROM unnest(claim.classes) AS c) AS cl (priority)
         CROSS JOIN (SELECT DISTINCT k FROM unnest(claim.kinds) AS k) AS kd (kind)
         CROSS JOIN LATERAL (
                SELECT r.run_id, r.priority, r.ready_at
                  FROM runq.runs AS r
                 WHERE r.status = 'queued' AND NOT r.parked
                   AND r.priority = cl.priority
                   AND r.kind = kd.kind
                   AND r.ready_at <= v_now
                 ORDER BY r.ready_at, r.run_id
                 LIMIT v_wanted
                   FOR UPDATE SKIP LOCKED) AS p
         ORDER BY p.priority, p.ready_at, p.run_id
         LIMIT v_wanted
    ), chosen AS (
        -- The default lease is read inside this statement, not by one more,
        -- and as a scalar: runq.settings is never analyzed, and a join to it
        -- would be planned for hundreds of rows.
        SELECT coalesce(claim.lease, (SELECT s.lease FROM runq.settings AS s)) AS lease
    ), claimed AS (
        UPDATE runq.runs AS r
           SET status = 'running',
               lease_epoch = r.lease_epoch + 1,
               attempts = r.attempts + 1,
               lease_owner = claim.worker_id,
               lease = l.lease,
               heartbeat_at = v_now,
               lease_expires_at = v_now + l.lease,
               updated_at = v_now
          FROM chosen AS l
         -- An array, not a join: with max_runs unknown to a generic plan, a
         -- join to picked would be planned as a hash join over all of runs.
         WHERE r.run_id = ANY (ARRAY(SELECT p.run_id FROM picked AS p))
        RETURNING r.run_id, r.lease_epoch, r.tenant_id, r.session_id, r.kind,
                  r.priority, r.payload, r.attempts, r.last_checkpoint,
                  r.ready_at, r.lease_expires_at, r.deadline, r.budget
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT c.run_id, c.lease_epoch, 'run.claimed',
               jsonb_build_object('worker_id', claim.worker_id, 'attempt', c.attempts),
               v_now
          FROM claimed AS c
    )
    -- A resumed run's checkpoint and inputs are read by VOLATILE functions, each
    -- with a snapshot taken after this statement locked the run: this
    -- statement's own snapshot may predate an input delivered (or a
    -- checkpoint written) just before the row lock was taken.
    SELECT c.run_id, c.lease_epoch::bigint, c.tenant_id::text, c.session_id::text,
           c.kind::text, c.priority::integer, c.payload::jsonb, c.attempts::integer,
           CASE WHEN c.lease_epoch > 1
                THEN runq._checkpoint_state(c.run_id, c.last_checkpoint) END,
           CASE WHEN c.lease_epoch > 1
                THEN runq._inputs_after(c.run_id, c.last_checkpoint) ELSE '[]' END,
           c.lease_epoch > 1, c.lease_expires_at, c.deadline, c.budget,
           CASE WHEN c.lease_epoch > 1 THEN runq._usage_totals(c.run_id) ELSE '{}' END
      FROM claimed AS c
     ORDER BY c.priority, c.ready_at, c.run_id;
    END IF;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    v_wanted := v_wanted - v_got::integer;
    -- A full claim pays this one plain test and leaves.
    EXIT WHEN v_wanted = 0;
    -- Fewer runs than asked for: this worker may now wait for NOTIFY runq.
    -- Marked idle, so that the runs submitted from now on notify
    -- (runq._wake_idle); runq._mark_idle also waits for every transaction
    -- that found no worker idle and is committing, and the claim looks once
    -- more, with a new clock: a run no wake-up announces is seen here.
    IF NOT v_idle THEN
        v_idle := true;
        PERFORM runq._mark_idle();
        v_now := clock_timestamp();
        CONTINUE;
    END IF;
    -- Still short, and some parked in these classes: a tenant below its
    -- limit may have its slots held by admitted runs this claim does not
    -- take (another class or kind); runq._swap_in parks those and admits
    -- these, and the claim looks once more. Two EXITs: an expression with a
    -- subquery is run as a query, where a plain one is evaluated in place.
    EXIT WHEN v_tried;
    EXIT WHEN NOT EXISTS (SELECT FROM runq.runs AS r
                           WHERE r.status = 'queued' AND r.parked
                             AND r.priority = ANY (claim.classes));
    v_tried := true;
    EXIT WHEN runq._swap_in(claim.classes, claim.kinds, v_wanted) = 0;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION runq.claim(integer[], text, interval, integer, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.claim(integer[], text, interval, integer, text[]) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.claim(integer[], text, interval, integer, text[]) IS
$c$Claim up to max_runs queued runs whose priority class is in classes (and, when kinds is given, whose kind is in kinds) and whose scheduled_for is NULL or past, lowest class first, then oldest; never a run whose tenant or kind has its limit of running runs (runq.set_limit), or whose class, kind or tenant is paused (runq.pause); runs skipped for their kind, a limit or a pause keep their place. Each claim adds 1 to the run's lease_epoch (returned as epoch: pass it to every worker call) and to its attempts (returned as attempt). checkpoint is the newest checkpoint, inputs the user inputs delivered after it ([] if none), resumed is true when the run ran before. deadline, budget and usage are the run's (usage: the totals every attempt recorded, {} when none). lease defaults to runq.settings.lease. Zero rows when nothing is ready. A claim that returns fewer than max_runs marks the workers idle for a minute: a run submitted ready now (or created by runq.tick) in that minute sends NOTIFY runq when its transaction commits, and none does otherwise (claim again within the minute to stay woken).
Raises 22023 (NULL, empty or multidimensional classes, a class outside 0..32767, max_runs below 1, a lease not between 0 and 1000 years, kinds empty, multidimensional or with a NULL).$c$;

COMMIT;
