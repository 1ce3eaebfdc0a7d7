-- Revert runq:function_claim from pg
-- (back to claim as v0.1.3 released it)
-- requires: table_runs
-- requires: index_runs_ready
-- requires: index_runs_ready_kind
-- requires: table_run_events
-- requires: function__checkpoint_state
-- requires: function__inputs_after
-- requires: table_settings
-- requires: role_runq_worker
-- requires: role_runq_admin
-- requires: argument_checks

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
-- The result type of v0.1.3 (without deadline, budget and usage): dropped
-- and created again.
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
                  lease_expires_at timestamptz)
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
    v_now  timestamptz := clock_timestamp();
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
    IF claim.kinds IS NULL THEN
        -- Any kind: one walk of runs_ready_idx, the classes in order.
        RETURN QUERY
    WITH picked AS (
        SELECT r.run_id
          FROM runq.runs AS r
         WHERE r.status = 'queued'
           AND r.priority = ANY (claim.classes)
           AND r.ready_at <= v_now
         ORDER BY r.priority, r.ready_at, r.run_id
         LIMIT claim.max_runs
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
                  r.ready_at, r.lease_expires_at
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
           c.lease_epoch > 1, c.lease_expires_at
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
        -- runs_ready_kind_idx, then the oldest max_runs of those. A walk of
        -- runs_ready_idx would read every queued run of other kinds ahead.
        -- The runs a pair locked but the final LIMIT drops stay locked until
        -- this claim commits: a concurrent claim steps over them, as over any
        -- run another claim holds, and they keep their place.
        SELECT p.run_id
          FROM (SELECT DISTINCT c FROM unnest(claim.classes) AS c) AS cl (priority)
         CROSS JOIN (SELECT DISTINCT k FROM unnest(claim.kinds) AS k) AS kd (kind)
         CROSS JOIN LATERAL (
                SELECT r.run_id, r.priority, r.ready_at
                  FROM runq.runs AS r
                 WHERE r.status = 'queued'
                   AND r.priority = cl.priority
                   AND r.kind = kd.kind
                   AND r.ready_at <= v_now
                 ORDER BY r.ready_at, r.run_id
                 LIMIT claim.max_runs
                   FOR UPDATE SKIP LOCKED) AS p
         ORDER BY p.priority, p.ready_at, p.run_id
         LIMIT claim.max_runs
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
                  r.ready_at, r.lease_expires_at
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
           c.lease_epoch > 1, c.lease_expires_at
      FROM claimed AS c
     ORDER BY c.priority, c.ready_at, c.run_id;
    END IF;
END
$$;

REVOKE ALL ON FUNCTION runq.claim(integer[], text, interval, integer, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.claim(integer[], text, interval, integer, text[]) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.claim(integer[], text, interval, integer, text[]) IS
$c$Claim up to max_runs queued runs whose priority class is in classes (and, when kinds is given, whose kind is in kinds) and whose scheduled_for is NULL or past, lowest class first, then oldest; runs skipped for their kind keep their place. Each claim adds 1 to the run's lease_epoch (returned as epoch: pass it to every worker call) and to its attempts (returned as attempt). checkpoint is the newest checkpoint, inputs the user inputs delivered after it ([] if none), resumed is true when the run ran before. lease defaults to runq.settings.lease. Zero rows when nothing is ready.
Raises 22023 (NULL, empty or multidimensional classes, a class outside 0..32767, max_runs below 1, a lease not between 0 and 1000 years, kinds empty, multidimensional or with a NULL).$c$;

COMMIT;
