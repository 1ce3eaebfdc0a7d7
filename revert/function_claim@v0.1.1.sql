-- Revert runq:function_claim from pg
-- (back to claim as v0.1.0 released it)
-- requires: table_runs
-- requires: index_runs_ready
-- requires: table_run_events
-- requires: table_checkpoints
-- requires: table_inputs
-- requires: table_settings
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

-- Called by workers. One statement picks up to max_runs ready runs of the
-- given classes, lowest class value first, then oldest, from runs_ready_idx
-- (FOR UPDATE SKIP LOCKED: contending workers step over each other's rows
-- instead of queueing on them), takes them with a new lease epoch and one
-- more attempt, and logs run.claimed. A first claim has no checkpoint and no
-- inputs, so it reads nothing else; a resumed run also reads its newest
-- checkpoint (one key lookup) and the inputs delivered after it, once locked.
-- Raises 22023 for bad arguments. Zero rows when nothing is ready.
CREATE OR REPLACE FUNCTION runq.claim(
    classes    integer[],
    worker_id  text     DEFAULT NULL,
    lease      interval DEFAULT NULL,
    max_runs   integer  DEFAULT 1)
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
    v      record;
BEGIN
    IF claim.classes IS NULL OR cardinality(claim.classes) = 0
       OR array_ndims(claim.classes) <> 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('classes must be a non-empty one-dimensional array, got %s',
                             coalesce(left(claim.classes::text, 100), 'NULL'));
    ELSIF array_position(claim.classes, NULL) IS NOT NULL
          OR NOT (0 <= ALL (claim.classes) AND 32767 >= ALL (claim.classes)) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('classes must be between 0 and 32767, got %s',
                             (SELECT coalesce(c::text, 'NULL') FROM unnest(claim.classes) AS c
                               WHERE c IS NULL OR c NOT BETWEEN 0 AND 32767 LIMIT 1));
    ELSIF claim.max_runs IS NULL OR claim.max_runs < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('max_runs must be at least 1, got %s',
                             coalesce(claim.max_runs::text, 'NULL'));
    ELSIF claim.lease <= interval '0' OR claim.lease >= interval '1000 years' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('lease must be positive and under 1000 years, got %s', claim.lease);
    END IF;

    FOR v IN
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
    SELECT c.run_id, c.lease_epoch::bigint AS lease_epoch, c.tenant_id::text AS tenant_id,
           c.session_id::text AS session_id, c.kind::text AS kind,
           c.priority::integer AS priority, c.payload::jsonb AS payload,
           c.attempts::integer AS attempts, c.last_checkpoint, c.lease_expires_at
      FROM claimed AS c
     ORDER BY c.priority, c.ready_at, c.run_id
    LOOP
        run_id := v.run_id;
        epoch := v.lease_epoch;
        tenant_id := v.tenant_id;
        session_id := v.session_id;
        kind := v.kind;
        priority := v.priority;
        payload := v.payload;
        attempt := v.attempts;
        resumed := v.lease_epoch > 1;
        lease_expires_at := v.lease_expires_at;
        checkpoint := NULL;
        inputs := '[]';
        IF resumed THEN
            -- Read in statements of their own, after the run is locked: the
            -- claiming statement's snapshot may predate an input delivered
            -- (or a checkpoint written) just before the row lock was taken.
            SELECT k.state INTO checkpoint
              FROM runq.checkpoints AS k
             WHERE k.run_id = v.run_id AND k.seq = v.last_checkpoint;
            SELECT coalesce(jsonb_agg(i.input ORDER BY i.seq), '[]') INTO inputs
              FROM runq.inputs AS i
             WHERE i.run_id = v.run_id AND i.seq > coalesce(v.last_checkpoint, 0);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION runq.claim(integer[], text, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.claim(integer[], text, interval, integer) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.claim(integer[], text, interval, integer) IS
$c$Claim up to max_runs queued runs whose priority class is in classes and whose scheduled_for is NULL or past, lowest class first, then oldest. Each claim adds 1 to the run's lease_epoch (returned as epoch: pass it to every worker call) and to its attempts (returned as attempt). checkpoint is the newest checkpoint, inputs the user inputs delivered after it ([] if none), resumed is true when the run ran before. lease defaults to runq.settings.lease. Zero rows when nothing is ready.
Raises 22023 (NULL, empty or multidimensional classes, a class outside 0..32767, max_runs below 1, a lease not between 0 and 1000 years).$c$;

COMMIT;
