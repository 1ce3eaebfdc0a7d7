-- Prototypes of a narrow-table storage for the hot path (a study, never
-- deployed): schema p, the run record (runq.runs' columns, with indexes
-- that no claim, heartbeat or completion writes to but the one that ends a
-- run) beside narrow tables for what a claim and a lease need. One design per
-- file section; study.py loads the common part and one design per database.

-- common
CREATE SCHEMA p;
CREATE TABLE p.runs (run_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  lease_epoch bigint NOT NULL DEFAULT 0, last_checkpoint bigint,
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
  scheduled_for timestamptz, ready_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz,
  heartbeat_at timestamptz, lease_expires_at timestamptz, finished_at timestamptz,
  lease interval, queue_ttl interval, attempts int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 3,
  turns int NOT NULL DEFAULT 0, tools_begun int NOT NULL DEFAULT 0, priority int NOT NULL,
  cancel_requested boolean NOT NULL DEFAULT false, status text NOT NULL DEFAULT 'queued',
  recovery_policy text NOT NULL DEFAULT 'resume', tenant_id text NOT NULL, session_id text, kind text NOT NULL,
  principal_id text, lease_owner text, payload jsonb NOT NULL DEFAULT '{}', result jsonb, failure jsonb,
  question jsonb, budget jsonb, timeout interval, deadline timestamptz, schedule text, outcome text)
  WITH (fillfactor = 80);
CREATE UNIQUE INDEX ON p.runs (tenant_id, session_id) WHERE outcome IS NULL AND session_id IS NOT NULL;
CREATE UNIQUE INDEX ON p.runs (schedule) WHERE outcome IS NULL AND schedule IS NOT NULL;
CREATE INDEX ON p.runs (tenant_id, kind, outcome, run_id) WHERE outcome IS NOT NULL;
CREATE INDEX ON p.runs (kind, outcome, run_id) WHERE outcome IS NOT NULL;
CREATE INDEX ON p.runs (priority, finished_at) WHERE outcome = 'failed';
CREATE INDEX ON p.runs (deadline) WHERE outcome IS NULL AND deadline IS NOT NULL;
CREATE TABLE p.ready (run_id bigint PRIMARY KEY, priority int NOT NULL, ready_at timestamptz NOT NULL,
  tenant_id text NOT NULL, kind text NOT NULL, parked boolean NOT NULL DEFAULT false, epoch bigint NOT NULL DEFAULT 0, expires_at timestamptz);
CREATE INDEX ready_claim ON p.ready (priority, ready_at, run_id) WHERE NOT parked;
CREATE INDEX ready_claim_kind ON p.ready (priority, kind, ready_at, run_id) WHERE NOT parked;
CREATE INDEX ready_tenant ON p.ready (parked, tenant_id, priority, ready_at, run_id);
CREATE INDEX ready_kind ON p.ready (parked, kind, priority, ready_at, run_id);
CREATE INDEX ready_expiry ON p.ready (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE p.leases (run_id bigint PRIMARY KEY, epoch bigint NOT NULL, lease_expires_at timestamptz NOT NULL,
  tenant_id text NOT NULL, kind text NOT NULL, heartbeat_at timestamptz) WITH (fillfactor = 70);
CREATE INDEX leases_tenant ON p.leases (tenant_id);
CREATE INDEX leases_kind ON p.leases (kind);
CREATE TABLE p.run_events (run_id bigint NOT NULL, event_id bigint GENERATED ALWAYS AS IDENTITY,
  epoch bigint NOT NULL, type text NOT NULL, payload jsonb NOT NULL DEFAULT '{}', created_at timestamptz NOT NULL,
  PRIMARY KEY (run_id, event_id));
CREATE TABLE p.settings (lease interval NOT NULL DEFAULT '30 seconds');
INSERT INTO p.settings DEFAULT VALUES;
CREATE TABLE p.limit_settings (scope text, key text, max_running int);

-- design a: ready + leases, the record updated (HOT) at the claim
CREATE FUNCTION p.claim(classes int[], worker_id text, lease interval DEFAULT NULL, max_runs int DEFAULT 1)
 RETURNS TABLE(run_id bigint, epoch bigint, tenant_id text, kind text, payload jsonb, attempt int, lease_expires_at timestamptz)
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
 RETURN QUERY
 WITH picked AS (
   SELECT r.run_id FROM p.ready AS r WHERE NOT r.parked AND r.priority = ANY (claim.classes) AND r.ready_at <= v_now
    ORDER BY r.priority, r.ready_at, r.run_id LIMIT claim.max_runs FOR UPDATE SKIP LOCKED
 ), moved AS (
   DELETE FROM p.ready AS r WHERE r.run_id = ANY (ARRAY(SELECT pk.run_id FROM picked AS pk)) RETURNING r.run_id
 ), chosen AS (SELECT coalesce(claim.lease, (SELECT s.lease FROM p.settings AS s)) AS lease
 ), claimed AS (
   UPDATE p.runs AS r SET status = 'running', lease_epoch = r.lease_epoch + 1, attempts = r.attempts + 1,
     lease_owner = claim.worker_id, lease = l.lease, heartbeat_at = v_now, lease_expires_at = v_now + l.lease, updated_at = v_now
     FROM chosen AS l WHERE r.run_id = ANY (ARRAY(SELECT m.run_id FROM moved AS m))
   RETURNING r.run_id, r.lease_epoch, r.tenant_id, r.kind, r.payload, r.attempts, r.lease_expires_at
 ), leased AS (
   INSERT INTO p.leases (run_id, epoch, lease_expires_at, tenant_id, kind, heartbeat_at)
   SELECT c.run_id, c.lease_epoch, c.lease_expires_at, c.tenant_id, c.kind, v_now FROM claimed AS c
 ), logged AS (
   INSERT INTO p.run_events (run_id, epoch, type, payload, created_at)
   SELECT c.run_id, c.lease_epoch, 'run.claimed', jsonb_build_object('worker_id', claim.worker_id, 'attempt', c.attempts), v_now FROM claimed AS c
 ) SELECT c.run_id, c.lease_epoch, c.tenant_id, c.kind, c.payload, c.attempts, c.lease_expires_at FROM claimed AS c;
END $$;
CREATE FUNCTION p.complete(run_id bigint, epoch bigint, result jsonb DEFAULT NULL) RETURNS boolean
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
 WITH ended AS (
   DELETE FROM p.leases AS l WHERE l.run_id = complete.run_id AND l.epoch = complete.epoch RETURNING l.run_id
 ), done AS (
   UPDATE p.runs AS r SET status = 'succeeded', outcome = 'succeeded', result = complete.result, lease_expires_at = NULL,
     finished_at = v_now, updated_at = v_now
    WHERE r.run_id = (SELECT e.run_id FROM ended AS e) RETURNING r.run_id, r.lease_epoch
 ) INSERT INTO p.run_events (run_id, epoch, type, payload, created_at)
   SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now FROM done AS d;
 RETURN FOUND;
END $$;
CREATE FUNCTION p.heartbeat(run_id bigint, epoch bigint) RETURNS boolean
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
BEGIN
 UPDATE p.leases AS l SET lease_expires_at = clock_timestamp() + interval '30 seconds', heartbeat_at = clock_timestamp()
  WHERE l.run_id = heartbeat.run_id AND l.epoch = heartbeat.epoch;
 RETURN FOUND;
END $$;

-- design b: ready + leases, the record written only at the end
CREATE FUNCTION p.claim(classes int[], worker_id text, lease interval DEFAULT NULL, max_runs int DEFAULT 1)
 RETURNS TABLE(run_id bigint, epoch bigint, tenant_id text, kind text, payload jsonb, attempt int, lease_expires_at timestamptz)
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
 RETURN QUERY
 WITH picked AS (
   SELECT r.run_id FROM p.ready AS r WHERE NOT r.parked AND r.priority = ANY (claim.classes) AND r.ready_at <= v_now
    ORDER BY r.priority, r.ready_at, r.run_id LIMIT claim.max_runs FOR UPDATE SKIP LOCKED
 ), moved AS (
   DELETE FROM p.ready AS r WHERE r.run_id = ANY (ARRAY(SELECT pk.run_id FROM picked AS pk)) RETURNING r.run_id, r.epoch + 1 AS epoch, r.tenant_id, r.kind
 ), chosen AS (SELECT coalesce(claim.lease, (SELECT s.lease FROM p.settings AS s)) AS lease
 ), leased AS (
   INSERT INTO p.leases (run_id, epoch, lease_expires_at, tenant_id, kind, heartbeat_at)
   SELECT m.run_id, m.epoch, v_now + c.lease, m.tenant_id, m.kind, v_now FROM moved AS m, chosen AS c
   RETURNING leases.run_id, leases.epoch, leases.lease_expires_at
 ), logged AS (
   INSERT INTO p.run_events (run_id, epoch, type, payload, created_at)
   SELECT c.run_id, c.epoch, 'run.claimed', jsonb_build_object('worker_id', claim.worker_id, 'attempt', c.epoch), v_now FROM leased AS c
 ) SELECT c.run_id, c.epoch, r.tenant_id, r.kind, r.payload, r.attempts + 1, c.lease_expires_at FROM leased AS c JOIN p.runs AS r ON r.run_id = c.run_id;
END $$;
CREATE FUNCTION p.complete(run_id bigint, epoch bigint, result jsonb DEFAULT NULL) RETURNS boolean
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
 WITH ended AS (
   DELETE FROM p.leases AS l WHERE l.run_id = complete.run_id AND l.epoch = complete.epoch RETURNING l.run_id, l.epoch
 ), done AS (
   UPDATE p.runs AS r SET status = 'succeeded', outcome = 'succeeded', result = complete.result, lease_epoch = e.epoch,
     attempts = r.attempts + 1, finished_at = v_now, updated_at = v_now
    FROM ended AS e WHERE r.run_id = e.run_id RETURNING r.run_id, r.lease_epoch
 ) INSERT INTO p.run_events (run_id, epoch, type, payload, created_at)
   SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now FROM done AS d;
 RETURN FOUND;
END $$;
CREATE FUNCTION p.heartbeat(run_id bigint, epoch bigint) RETURNS boolean
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
BEGIN
 UPDATE p.leases AS l SET lease_expires_at = clock_timestamp() + interval '30 seconds', heartbeat_at = clock_timestamp()
  WHERE l.run_id = heartbeat.run_id AND l.epoch = heartbeat.epoch;
 RETURN FOUND;
END $$;

-- design c: one live table (queued and running), the record written at the end
CREATE TABLE p.live (run_id bigint PRIMARY KEY, running boolean NOT NULL DEFAULT false, priority int NOT NULL, ready_at timestamptz NOT NULL,
  tenant_id text NOT NULL, kind text NOT NULL, parked boolean NOT NULL DEFAULT false, epoch bigint NOT NULL DEFAULT 0,
  lease_expires_at timestamptz) WITH (fillfactor = 80);
CREATE INDEX live_claim ON p.live (priority, ready_at, run_id) WHERE NOT running AND NOT parked;
CREATE INDEX live_running ON p.live (tenant_id, kind) WHERE running;
CREATE FUNCTION p.claim(classes int[], worker_id text, lease interval DEFAULT NULL, max_runs int DEFAULT 1)
 RETURNS TABLE(run_id bigint, epoch bigint, tenant_id text, kind text, payload jsonb, attempt int, lease_expires_at timestamptz)
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
 RETURN QUERY
 WITH picked AS (
   SELECT r.run_id FROM p.live AS r WHERE NOT r.running AND NOT r.parked AND r.priority = ANY (claim.classes) AND r.ready_at <= v_now
    ORDER BY r.priority, r.ready_at, r.run_id LIMIT claim.max_runs FOR UPDATE SKIP LOCKED
 ), chosen AS (SELECT coalesce(claim.lease, (SELECT s.lease FROM p.settings AS s)) AS lease
 ), leased AS (
   UPDATE p.live AS l SET running = true, epoch = l.epoch + 1, lease_expires_at = v_now + c.lease
     FROM chosen AS c WHERE l.run_id = ANY (ARRAY(SELECT pk.run_id FROM picked AS pk))
   RETURNING l.run_id, l.epoch, l.lease_expires_at
 ), logged AS (
   INSERT INTO p.run_events (run_id, epoch, type, payload, created_at)
   SELECT c.run_id, c.epoch, 'run.claimed', jsonb_build_object('worker_id', claim.worker_id, 'attempt', c.epoch), v_now FROM leased AS c
 ) SELECT c.run_id, c.epoch, r.tenant_id, r.kind, r.payload, r.attempts + 1, c.lease_expires_at FROM leased AS c JOIN p.runs AS r ON r.run_id = c.run_id;
END $$;
CREATE FUNCTION p.complete(run_id bigint, epoch bigint, result jsonb DEFAULT NULL) RETURNS boolean
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
 WITH ended AS (
   DELETE FROM p.live AS l WHERE l.run_id = complete.run_id AND l.epoch = complete.epoch AND l.running RETURNING l.run_id, l.epoch
 ), done AS (
   UPDATE p.runs AS r SET status = 'succeeded', outcome = 'succeeded', result = complete.result, lease_epoch = e.epoch,
     attempts = r.attempts + 1, finished_at = v_now, updated_at = v_now
    FROM ended AS e WHERE r.run_id = e.run_id RETURNING r.run_id, r.lease_epoch
 ) INSERT INTO p.run_events (run_id, epoch, type, payload, created_at)
   SELECT d.run_id, d.lease_epoch, 'run.succeeded', '{}', v_now FROM done AS d;
 RETURN FOUND;
END $$;
CREATE FUNCTION p.heartbeat(run_id bigint, epoch bigint) RETURNS boolean
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
BEGIN
 UPDATE p.live AS l SET lease_expires_at = clock_timestamp() + interval '30 seconds'
  WHERE l.run_id = heartbeat.run_id AND l.epoch = heartbeat.epoch AND l.running;
 RETURN FOUND;
END $$;
