-- Deploy runq:function_spawn to pg
-- requires: table_spawns
-- requires: columns_runs_parent
-- requires: columns_settings_children
-- requires: function__refuse
-- requires: argument_checks
-- requires: argument_check_usage
-- requires: role_runq_worker
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by workers: a run hands part of its work to a child run
-- (docs/contract.md "Child runs"). The parent is locked, fenced, before its
-- key is looked up, so that two spawns of one key (parallel tool calls of
-- one agent) give one child, and a cancel or the end of the parent cannot
-- pass between the check and the insert: a child is created only while its
-- parent is running and held. The key is decided after fencing: a fenced
-- spawn returns NULL whether or not the key exists.
-- The child has the parent's tenant and principal, no session, the parent's
-- priority unless given, and the earlier of its own deadline and the
-- parent's, fixed now.
CREATE FUNCTION runq.spawn(
    run_id          bigint,
    epoch           bigint,
    key             text,
    kind            text,
    payload         jsonb    DEFAULT '{}',
    priority        integer  DEFAULT NULL,
    max_attempts    integer  DEFAULT 3,
    recovery_policy text     DEFAULT 'resume',
    timeout         interval DEFAULT NULL,
    budget          jsonb    DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_hash   bytea;
    v_parent record;
    v_child  bigint;
    v_known  bytea;
    v_depth  bigint;
    v_caps   record;
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks), before fencing is decided.
    IF runq._check_identifier('key', spawn.key)
       AND runq._check_identifier('kind', spawn.kind)
       AND runq._check_object('payload', spawn.payload)
       AND (CASE WHEN spawn.priority IS NULL OR spawn.priority BETWEEN 0 AND 32767 THEN true
                ELSE runq._bad_argument('priority', 'NULL or between 0 and 32767', spawn.priority) END)
       AND runq._check_count('max_attempts', spawn.max_attempts)
       AND runq._check_choice('recovery_policy', spawn.recovery_policy, 'resume, fail, zero_work')
       AND runq._check_duration('timeout', spawn.timeout)
       AND runq._check_usage('budget', spawn.budget, optional => true) THEN
    END IF;
    IF spawn.epoch IS NULL THEN
        PERFORM runq._bad_argument('epoch', 'given', spawn.epoch);
    END IF;

    SELECT r.tenant_id, r.principal_id, r.priority, r.deadline, r.spawned, r.parent_run_id
      INTO v_parent
      FROM runq.runs AS r
     WHERE r.run_id = spawn.run_id
       AND r.status = 'running' AND r.lease_epoch = spawn.epoch  -- fence
       AND NOT r.cancel_requested
       AND (r.deadline IS NULL OR r.deadline > v_now)  -- else runq._refuse fails it
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM runq._refuse(spawn.run_id, spawn.epoch, 'spawn', true);
        RETURN NULL;
    END IF;

    -- Compared as given: a NULL priority is not the parent's priority.
    v_hash := sha256(convert_to(jsonb_build_array(
                  spawn.kind, spawn.payload, spawn.priority, spawn.max_attempts,
                  spawn.recovery_policy, extract(epoch FROM spawn.timeout), spawn.budget)::text, 'UTF8'));
    SELECT s.run_id, s.request_hash INTO v_child, v_known
      FROM runq.spawns AS s
     WHERE s.parent_run_id = spawn.run_id AND s.key = spawn.key;
    IF FOUND THEN
        IF v_known <> v_hash THEN
            RAISE EXCEPTION USING ERRCODE = 'RQ001',
                MESSAGE = format('child key %L of run %s was used for another request',
                                 spawn.key, spawn.run_id),
                DETAIL = format('The key belongs to child run %s.', v_child),
                HINT = 'Use a new key for a new child.';
        END IF;
        RETURN v_child;
    END IF;

    SELECT s.max_child_depth, s.max_children INTO v_caps FROM runq.settings AS s;
    IF coalesce(v_parent.spawned, 0) >= v_caps.max_children THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('run %s has spawned %s children, the most runq.settings.max_children allows;'
                             ' key %L would be one more', spawn.run_id, v_parent.spawned, spawn.key);
    END IF;
    IF v_parent.parent_run_id IS NOT NULL THEN
        WITH RECURSIVE up (run_id) AS (
            SELECT v_parent.parent_run_id
            UNION ALL
            SELECT r.parent_run_id FROM up JOIN runq.runs AS r ON r.run_id = up.run_id
             WHERE r.parent_run_id IS NOT NULL
        )
        SELECT count(*) INTO v_depth FROM up;
    END IF;
    IF coalesce(v_depth, 0) + 1 > v_caps.max_child_depth THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('run %s is at depth %s: a child of it would be at depth %s, deeper than'
                             ' runq.settings.max_child_depth (%s)', spawn.run_id, coalesce(v_depth, 0),
                             coalesce(v_depth, 0) + 1, v_caps.max_child_depth);
    END IF;

    WITH created AS (
        INSERT INTO runq.runs AS r
               (created_at, updated_at, max_attempts, priority, recovery_policy, tenant_id,
                kind, principal_id, payload, budget, timeout, deadline, parent_run_id)
        VALUES (v_now, v_now, spawn.max_attempts, coalesce(spawn.priority, v_parent.priority),
                spawn.recovery_policy, v_parent.tenant_id, spawn.kind, v_parent.principal_id,
                spawn.payload, spawn.budget, spawn.timeout,
                least(v_now + spawn.timeout, v_parent.deadline), spawn.run_id)
        RETURNING r.run_id, r.priority
    ), keyed AS (
        INSERT INTO runq.spawns (parent_run_id, key, run_id, request_hash)
        SELECT spawn.run_id, spawn.key, c.run_id, v_hash FROM created AS c
    ), logged AS (
        INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
        SELECT c.run_id, 0, 'run.created',
               jsonb_build_object('kind', spawn.kind, 'priority', c.priority,
                                  'parent_run_id', spawn.run_id, 'key', spawn.key),
               v_now
          FROM created AS c
        UNION ALL
        SELECT spawn.run_id, spawn.epoch, 'run.spawned',
               jsonb_build_object('run_id', c.run_id, 'key', spawn.key), v_now
          FROM created AS c
    )
    SELECT c.run_id INTO v_child FROM created AS c;

    UPDATE runq.runs AS r
       SET spawned = coalesce(r.spawned, 0) + 1, updated_at = v_now
     WHERE r.run_id = spawn.run_id;
    RETURN v_child;
END
$$;

REVOKE ALL ON FUNCTION runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb)
    TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.spawn(bigint, bigint, text, text, jsonb, integer, integer, text, interval, jsonb) IS
$c$Create a queued child run of a run this worker holds under epoch, and return its run_id. The child has the parent's tenant_id, no session, the parent's priority unless priority is given, parent_run_id set, and the earlier of now + timeout and the parent's deadline as its deadline. key (1 to 256 characters) names the child among its parent's children for the parent's whole life: spawning a key again returns that child and creates nothing, whatever epoch spawned it. Usage the child records is added to every ancestor's totals, and its budget gate reads every ancestor's budget. The parent logs run.spawned. Returns NULL when fenced (one run.fenced), when cancel was requested (the run becomes cancelled) or past the run's deadline (it becomes failed, deadline_exceeded): nothing is created then.
Raises 22023 (a bad argument, checked before fencing: NULL run_id or epoch, key or kind not 1 to 256 characters, payload not an object, priority outside 0..32767, max_attempts below 1, recovery_policy not resume, fail or zero_work, timeout not positive, budget not a non-empty object of non-negative numbers; and a child past runq.settings.max_child_depth or runq.settings.max_children), RQ001 (key spawned already with another request), RQ003 (no such run).$c$;

COMMIT;
