-- Deploy runq:function_submit to pg
-- requires: function_submit@v0.2.0
-- requires: index_runs_session_active

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by submitters. Routes a request, in one transaction, in this order:
--   1. idempotency key seen before: same request hash -> the original run,
--      'duplicate'; other hash -> RQ001. The key row is inserted first with
--      ON CONFLICT DO NOTHING, so of two concurrent submits with one key the
--      second waits for the first and then sees its outcome.
--   2. the session's active run is waiting_for_user -> the payload is its
--      input, 'input_delivered' (locks that run).
--   3. the session's active run is queued, running or waiting for its
--      children (runq.wait_children) -> RQ002.
--   4. a new queued run, 'created'. The partial unique index is the arbiter:
--      a concurrent submit that won the session makes this one RQ002.
-- Raises 22023 for bad arguments, RQ001, RQ002. Notifies channel runq.
--
-- The arguments are checked by the shared checks of argument_checks.
-- runq.purge deletes keys: a key deleted between the insert that met it and
-- the read of it is taken again, instead of answering 'duplicate' with no run.
CREATE OR REPLACE FUNCTION runq.submit(
    tenant_id        text,
    kind             text,
    payload          jsonb       DEFAULT '{}',
    session_id       text        DEFAULT NULL,
    priority         integer     DEFAULT 10,
    idempotency_key  text        DEFAULT NULL,
    principal_id     text        DEFAULT NULL,
    scheduled_for    timestamptz DEFAULT NULL,
    max_attempts     integer     DEFAULT 3,
    recovery_policy  text        DEFAULT 'resume',
    queue_ttl        interval    DEFAULT NULL,
    budget           jsonb       DEFAULT NULL,
    timeout          interval    DEFAULT NULL)
    RETURNS TABLE(run_id bigint, outcome text)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := clock_timestamp();
    v_hash      bytea;
    v_key_hash  bytea;
    v_key_run   bigint;
    v_active    bigint;
    v_status    text;
    v_run_id    bigint;
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks), in the order of the arguments. An IF runs them
    -- as one expression; a PERFORM would run them as a statement of its own.
    -- A principal is the caller's own name for who asked: empty is allowed.
    IF runq._check_identifier('tenant_id', submit.tenant_id)
       AND runq._check_identifier('kind', submit.kind)
       AND runq._check_object('payload', submit.payload)
       AND runq._check_identifier('session_id', submit.session_id, optional => true)
       AND (CASE WHEN submit.priority BETWEEN 0 AND 32767 THEN true
                ELSE runq._bad_argument('priority', 'between 0 and 32767', submit.priority) END)
       AND runq._check_identifier('idempotency_key', submit.idempotency_key, optional => true)
       AND (CASE WHEN submit.principal_id IS NULL OR length(submit.principal_id) <= 256 THEN true
                ELSE runq._bad_argument('principal_id', 'NULL or at most 256 characters',
                                        quote_literal(left(submit.principal_id, 100))) END)
       AND (CASE WHEN submit.scheduled_for IS NULL OR isfinite(submit.scheduled_for) THEN true
                ELSE runq._bad_argument('scheduled_for', 'NULL or a finite time',
                                        submit.scheduled_for) END)
       AND runq._check_count('max_attempts', submit.max_attempts)
       AND runq._check_choice('recovery_policy', submit.recovery_policy, 'resume, fail, zero_work')
       AND runq._check_duration('queue_ttl', submit.queue_ttl)
       AND runq._check_usage('budget', submit.budget, optional => true)
       AND runq._check_duration('timeout', submit.timeout) THEN
    END IF;

    -- 1. Idempotency.
    IF submit.idempotency_key IS NOT NULL THEN
        v_hash := runq._request_hash(submit.kind, submit.payload, submit.session_id,
                                     submit.priority, submit.scheduled_for,
                                     submit.max_attempts, submit.recovery_policy,
                                     submit.queue_ttl, submit.budget, submit.timeout);
        -- A purge can delete the key, with its finished run, between the
        -- insert that met it and the read below: the key is free then, so
        -- this submit tries to take it again.
        LOOP
            INSERT INTO runq.idempotency_keys
                   (tenant_id, principal_id, idempotency_key, request_hash, created_at)
            VALUES (submit.tenant_id, submit.principal_id, submit.idempotency_key, v_hash, v_now)
            ON CONFLICT ON CONSTRAINT idempotency_keys_scope_key DO NOTHING;
            EXIT WHEN FOUND;
            SELECT k.request_hash, k.run_id INTO v_key_hash, v_key_run
              FROM runq.idempotency_keys AS k
             WHERE k.tenant_id = submit.tenant_id
               AND k.idempotency_key = submit.idempotency_key
               AND (k.principal_id = submit.principal_id
                    OR (k.principal_id IS NULL AND submit.principal_id IS NULL));
            IF FOUND THEN
                IF v_key_hash <> v_hash THEN
                    RAISE EXCEPTION USING ERRCODE = 'RQ001',
                        MESSAGE = format('idempotency key %L of tenant %s was used for another request',
                                         submit.idempotency_key, submit.tenant_id),
                        DETAIL = format('The key belongs to run %s.', v_key_run),
                        HINT = 'Use a new key for a new request.';
                END IF;
                RETURN QUERY SELECT v_key_run, 'duplicate'::text;
                RETURN;
            END IF;
        END LOOP;
    END IF;

    -- 2. and 3. The session's active run, if any.
    IF submit.session_id IS NOT NULL THEN
        SELECT r.run_id, r.status::text INTO v_active, v_status
          FROM runq.runs AS r
         WHERE r.tenant_id = submit.tenant_id
           AND r.session_id = submit.session_id
           AND r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children')
           FOR UPDATE;
        IF v_status = 'waiting_for_user' THEN
            PERFORM runq._deliver_input(v_active, submit.payload, v_now);
            v_run_id := v_active;
            outcome := 'input_delivered';
        ELSIF v_status IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'RQ002',
                MESSAGE = format('session %s of tenant %s already has active run %s',
                                 submit.session_id, submit.tenant_id, v_active),
                DETAIL = format('Run %s is %s.', v_active, v_status),
                HINT = 'Wait for it to finish, or cancel it.';
        END IF;
    END IF;

    -- 4. A new run.
    IF v_run_id IS NULL THEN
        WITH created AS (
            INSERT INTO runq.runs AS r
                   (created_at, updated_at, scheduled_for, expires_at, queue_ttl,
                    max_attempts, priority, recovery_policy, tenant_id, session_id,
                    kind, principal_id, payload, budget, timeout, deadline)
            VALUES (v_now, v_now, submit.scheduled_for, v_now + submit.queue_ttl,
                    submit.queue_ttl, submit.max_attempts, submit.priority,
                    submit.recovery_policy, submit.tenant_id, submit.session_id,
                    submit.kind, submit.principal_id, submit.payload,
                    submit.budget, submit.timeout, v_now + submit.timeout)
            ON CONFLICT (tenant_id, session_id)
               WHERE status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children')
                 AND session_id IS NOT NULL
               DO NOTHING
            RETURNING r.run_id
        )
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT c.run_id, 0, 'run.created',
               jsonb_strip_nulls(jsonb_build_object(
                   'kind', submit.kind, 'priority', submit.priority,
                   'session_id', submit.session_id,
                   'idempotency_key', submit.idempotency_key,
                   'scheduled_for', submit.scheduled_for)),
               v_now
          FROM created AS c
        RETURNING run_events.run_id INTO v_run_id;

        IF v_run_id IS NULL THEN
            -- Another transaction took the session between our look and our insert.
            SELECT r.run_id INTO v_active
              FROM runq.runs AS r
             WHERE r.tenant_id = submit.tenant_id
               AND r.session_id = submit.session_id
               AND r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children');
            RAISE EXCEPTION USING ERRCODE = 'RQ002',
                MESSAGE = format('session %s of tenant %s already has active run %s',
                                 submit.session_id, submit.tenant_id, v_active),
                DETAIL = format('Run %s was created by a concurrent submit.', v_active),
                HINT = 'Wait for it to finish, or cancel it.';
        END IF;
        outcome := 'created';
    END IF;

    IF submit.idempotency_key IS NOT NULL THEN
        UPDATE runq.idempotency_keys AS k
           SET run_id = v_run_id
         WHERE k.tenant_id = submit.tenant_id
           AND k.idempotency_key = submit.idempotency_key
           AND (k.principal_id = submit.principal_id
                OR (k.principal_id IS NULL AND submit.principal_id IS NULL));
    END IF;

    run_id := v_run_id;
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval, jsonb, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval, jsonb, interval)
    TO runq_client, runq_admin;

COMMENT ON FUNCTION runq.submit(text, text, jsonb, text, integer, text, text, timestamptz, integer, text, interval, jsonb, interval) IS
$c$Submit a run, or route the request to the session's waiting run.
Returns (run_id, outcome): outcome is created, duplicate (same idempotency key and request: the original run, nothing changed) or input_delivered (the session's waiting_for_user run got payload as input and is queued again).
priority: 0 interactive, 10 async, 20 maintenance (any 0..32767). recovery_policy: resume, fail or zero_work. queue_ttl: a queued run older than this fails with queue_ttl_expired. budget: limits on the run's recorded usage over all its attempts, e.g. {"cost_usd": 2.00} (runq.record_usage; begin_turn fails the run once a total reaches its limit). timeout: the run must be terminal within it (deadline = now + timeout), else it fails with deadline_exceeded. A submit that delivers input to a waiting run leaves that run's budget and timeout as they were.
Identifiers (tenant_id, kind, session_id, idempotency_key, principal_id) are at most 256 characters.
Raises RQ001 (idempotency key reused for another request), RQ002 (the session has a queued or running run), 22023 (bad argument).$c$;

COMMIT;
