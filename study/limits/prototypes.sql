-- Prototypes of the candidate limit primitives, in schema study, for the
-- study database only (never deployed). runq.claim and runq.complete are the
-- deployed ones; everything here wraps or copies them.
DROP SCHEMA IF EXISTS study CASCADE;
CREATE SCHEMA study;

-- 0w: the wrapper alone. Candidates 1 and 2 need a statement after the claim
-- that knows the claimed run's tenant; in this prototype that is a plpgsql
-- wrapper around runq.claim (max_runs 1). Its own cost is measured alone so
-- that it can be subtracted: an implementation inside claim would not pay it.
CREATE FUNCTION study.claim_wrap(classes integer[], worker_id text,
                                 OUT run_id bigint, OUT epoch bigint, OUT tenant_id text)
    RETURNS SETOF record LANGUAGE plpgsql AS $$
BEGIN
    SELECT c.run_id, c.epoch, c.tenant_id INTO run_id, epoch, tenant_id
      FROM runq.claim(classes, worker_id) AS c;
    IF FOUND THEN
        RETURN NEXT;
    END IF;
END $$;

-- 1: exact check by counting. Claim, then serialize the claims of that tenant
-- on an advisory lock held to commit, then count its running runs in a new
-- statement (a new snapshot: it sees every claim committed before the lock was
-- granted). Over the limit: raise, which rolls the claim back.
-- Needs (created by study.py for candidate 1's measurements only):
--   CREATE INDEX runs_running_tenant_idx ON runq.runs (tenant_id) WHERE status = 'running';
CREATE FUNCTION study.claim_count(classes integer[], worker_id text, max_running integer,
                                  OUT run_id bigint, OUT epoch bigint, OUT tenant_id text)
    RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
    v_running bigint;
BEGIN
    SELECT c.run_id, c.epoch, c.tenant_id INTO run_id, epoch, tenant_id
      FROM runq.claim(classes, worker_id) AS c;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('tenant:' || tenant_id, 0));
    SELECT count(*) INTO v_running FROM runq.runs AS r
     WHERE r.tenant_id = claim_count.tenant_id AND r.status = 'running';
    IF v_running > max_running THEN
        RAISE EXCEPTION 'tenant % at its limit', tenant_id USING ERRCODE = 'RQ900';
    END IF;
    RETURN NEXT;
END $$;

-- 2: counter rows. One row per key; claim adds 1 unless at the limit (0 rows
-- updated: at the limit, raise), complete takes 1 off in its own statement.
CREATE TABLE study.key_counts (
    scope       text    NOT NULL,
    key         text    NOT NULL,
    running     integer NOT NULL DEFAULT 0,
    max_running integer NOT NULL,
    PRIMARY KEY (scope, key));
CREATE FUNCTION study.claim_counter(classes integer[], worker_id text,
                                    OUT run_id bigint, OUT epoch bigint, OUT tenant_id text)
    RETURNS SETOF record LANGUAGE plpgsql AS $$
BEGIN
    SELECT c.run_id, c.epoch, c.tenant_id INTO run_id, epoch, tenant_id
      FROM runq.claim(classes, worker_id) AS c;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE study.key_counts AS k SET running = k.running + 1
     WHERE k.scope = 'tenant' AND k.key = claim_counter.tenant_id
       AND k.running < k.max_running;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant % at its limit', tenant_id USING ERRCODE = 'RQ900';
    END IF;
    RETURN NEXT;
END $$;

-- runq.complete with the decrement as one more CTE of its statement.
CREATE FUNCTION study.complete_counter(run_id bigint, epoch bigint, result jsonb DEFAULT NULL)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    WITH done AS (
        UPDATE runq.runs AS r
           SET status = 'succeeded', result = complete_counter.result,
               lease_expires_at = NULL, finished_at = v_now, updated_at = v_now
         WHERE r.run_id = complete_counter.run_id
           AND r.status = 'running' AND r.lease_epoch = complete_counter.epoch
        RETURNING r.run_id, r.lease_epoch, r.tenant_id
    ), freed AS (
        UPDATE study.key_counts AS k SET running = k.running - 1
          FROM done AS d
         WHERE k.scope = 'tenant' AND k.key = d.tenant_id
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now
      FROM done AS d;
    IF FOUND THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(complete_counter.run_id, complete_counter.epoch, 'complete', false);
END $$;

-- 3: the index of parked runs (over-limit runs moved out of the ready order by
-- ready_at = 'infinity'), empty here, and two ways for a run leaving
-- 'running' to probe it for its tenant's next parked run.
-- Created by study.py for candidates 3 and 4 only:
--   CREATE INDEX runs_parked_idx ON runq.runs (tenant_id, priority, run_id)
--       WHERE ready_at = 'infinity';

-- 3a: an AFTER UPDATE OF status trigger.
CREATE FUNCTION study.probe_parked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM runq.runs AS p
      WHERE p.tenant_id = NEW.tenant_id AND p.ready_at = 'infinity'
        AND p.status = 'queued'
      ORDER BY p.priority, p.run_id LIMIT 1;
    RETURN NULL;
END $$;
-- created (and dropped) by study.py for the measurement of 3a only:
--   CREATE TRIGGER runs_probe_parked AFTER UPDATE OF status ON runq.runs FOR EACH ROW
--     WHEN (OLD.status = 'running' AND NEW.status <> 'running')
--     EXECUTE FUNCTION study.probe_parked();

-- 3b: the same probe as one more CTE of complete's statement (referenced by
-- the INSERT, or it would not run).
CREATE FUNCTION study.complete_probe(run_id bigint, epoch bigint, result jsonb DEFAULT NULL)
    RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    WITH done AS (
        UPDATE runq.runs AS r
           SET status = 'succeeded', result = complete_probe.result,
               lease_expires_at = NULL, finished_at = v_now, updated_at = v_now
         WHERE r.run_id = complete_probe.run_id
           AND r.status = 'running' AND r.lease_epoch = complete_probe.epoch
        RETURNING r.run_id, r.lease_epoch, r.tenant_id
    ), next_parked AS (
        SELECT d.run_id,
               (SELECT p.run_id FROM runq.runs AS p
                 WHERE p.tenant_id = d.tenant_id AND p.ready_at = 'infinity'
                   AND p.status = 'queued'
                 ORDER BY p.priority, p.run_id LIMIT 1) AS parked
          FROM done AS d
    )
    INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
    SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now
      FROM done AS d JOIN next_parked AS n ON n.run_id = d.run_id;
    IF FOUND THEN
        RETURN true;
    END IF;
    RETURN runq._refuse(complete_probe.run_id, complete_probe.epoch, 'complete', false);
END $$;

-- 4a: claim skipping a saturated tenant by a filter, with its runs left in
-- the ready index: the copy of runq.claim's any-kind branch with one more
-- condition in picked (and max_runs 1, the lease from settings).
CREATE FUNCTION study.claim_skip(classes integer[], worker_id text, skip_tenants text[])
    RETURNS TABLE(run_id bigint, epoch bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET plan_cache_mode = force_generic_plan
    SET jit = off AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT r.run_id
          FROM runq.runs AS r
         WHERE r.status = 'queued'
           AND r.priority = ANY (claim_skip.classes)
           AND r.ready_at <= v_now
           AND r.tenant_id <> ALL (claim_skip.skip_tenants)
         ORDER BY r.priority, r.ready_at, r.run_id
         LIMIT 1
           FOR UPDATE SKIP LOCKED
    ), chosen AS (
        SELECT (SELECT s.lease FROM runq.settings AS s) AS lease
    ), claimed AS (
        UPDATE runq.runs AS r
           SET status = 'running',
               lease_epoch = r.lease_epoch + 1,
               attempts = r.attempts + 1,
               lease_owner = claim_skip.worker_id,
               lease = l.lease,
               heartbeat_at = v_now,
               lease_expires_at = v_now + l.lease,
               updated_at = v_now
          FROM chosen AS l
         WHERE r.run_id = ANY (ARRAY(SELECT p.run_id FROM picked AS p))
        RETURNING r.run_id, r.lease_epoch, r.attempts
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT c.run_id, c.lease_epoch, 'run.claimed',
               jsonb_build_object('worker_id', claim_skip.worker_id, 'attempt', c.attempts),
               v_now
          FROM claimed AS c
    )
    SELECT c.run_id, c.lease_epoch::bigint FROM claimed AS c;
END $$;
