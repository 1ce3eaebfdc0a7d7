-- Deploy runq:function_tick to pg
-- requires: function_tick@v0.2.0
-- requires: index_runs_schedule_active

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called on a timer by worker pools (like sweep) and by operators, from any
-- number of processes at once. Up to max_runs schedules whose next slot has
-- come and that no 'schedule' pause holds, soonest slot first, are taken
-- FOR UPDATE SKIP LOCKED from the head of schedule_settings_due_idx: two
-- ticks never take one schedule, and a tick that takes one after another
-- tick advanced it sees (in the re-check of the locked row) that its slot has
-- not come. For each, in one statement:
--   * slots were missed (more than one due): only the newest runs; the older
--     ones are one 'missed' row, slot the oldest of them, run_id NULL;
--   * the schedule's previous run is still non-terminal: 'skipped_overlap',
--     run_id that run;
--   * else a run, inserted as runq.submit inserts one (the same columns,
--     run.created at epoch 0, the admission trigger parks it under a limit or
--     pause, the trigger runs_wake wakes an idle worker), with schedule set
--     and payload || {"slot": the slot in ISO 8601 UTC}: 'created'.
-- The guard is runs_schedule_active_key, not the look: the insert is ON
-- CONFLICT on it DO NOTHING, so a live run the look could not see (one a
-- concurrent redrive committed meanwhile) also ends as skipped_overlap,
-- named by a second look, in a statement of its own, once it has committed.
-- Then next_slot goes to the first slot after now, last_slot to the newest
-- slot handled, last_run_id to the run created, if any.
-- Takes the settings lock shared first, in a statement of its own, as
-- admissions do: a pause committed before it is seen by the pick, and one
-- being made waits (runq._lock_settings) for the tick's end.
-- Locks: schedule rows (skipped when locked), then the limited tenants and
-- kinds of their runs in sorted order, then what a submit locks. (A redrive
-- under limits of a schedule's run, racing a tick that inserts that
-- schedule's next run, can still deadlock with it: each waits on the other's
-- row or tenant lock; the server ends one with 40P01, and a pool ticks again.)
-- Raises 22023 (max_runs NULL or below 1).
CREATE OR REPLACE FUNCTION runq.tick(max_runs integer DEFAULT 100)
    RETURNS TABLE(schedule text, slot timestamptz, run_id bigint, outcome text)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- A generic plan, made once per session: with many schedules the generic
    -- estimate of "slot has come" is a third of them, so the plan cache kept
    -- choosing a custom plan and planned this statement on every tick (1.45
    -- against 0.22 ms a tick with nothing due among 10,000 schedules, 100).
    -- The pick is an index range that is empty, or short, when ticks keep up.
    SET plan_cache_mode = force_generic_plan
    SET jit = off
    -- AT TIME ZONE reads a name as an abbreviation first: the same set for
    -- every tick, the one create_schedule checked the zone under.
    SET timezone_abbreviations = 'Default'
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_names    text[];
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks). An IF runs it as an expression; a PERFORM
    -- would run it as a statement of its own.
    IF runq._check_count('max_runs', tick.max_runs) THEN
    END IF;
    PERFORM pg_advisory_xact_lock_shared(runq._settings_lock());

    v_names := ARRAY(
        SELECT s.name::text
          FROM runq.schedule_settings AS s
         WHERE s.next_slot <= v_now
           AND NOT EXISTS (SELECT FROM runq.pause_settings AS p
                            WHERE p.scope = 'schedule' AND p.key = s.name)
         ORDER BY s.next_slot, s.name
         LIMIT tick.max_runs
           FOR UPDATE OF s SKIP LOCKED);
    IF cardinality(v_names) = 0 THEN
        RETURN;
    END IF;
    -- The admission of each run locks its tenant, then its kind, when they
    -- have limits, until commit; runs of many keys inserted in schedule order
    -- would take those locks in no order, and two ticks, or a tick and a
    -- submit, could deadlock. So the keys are locked first, in one order:
    -- the tenants sorted, then the kinds sorted (a submit takes one tenant,
    -- then one kind). The admissions take them again, already held.
    PERFORM pg_advisory_xact_lock(runq._key_lock('tenant', k.tenant_id))
       FROM (SELECT DISTINCT s.tenant_id::text AS tenant_id FROM runq.schedule_settings AS s
              WHERE s.name = ANY (v_names)) AS k
      WHERE runq._limit_of('tenant', k.tenant_id) IS NOT NULL
      ORDER BY k.tenant_id;
    PERFORM pg_advisory_xact_lock(runq._key_lock('kind', k.kind))
       FROM (SELECT DISTINCT s.kind::text AS kind FROM runq.schedule_settings AS s
              WHERE s.name = ANY (v_names)) AS k
      WHERE runq._limit_of('kind', k.kind) IS NOT NULL
      ORDER BY k.kind;

    FOR schedule, slot, run_id, outcome IN
        WITH picked AS (
            SELECT s.name::text AS name, s.tenant_id::text AS tenant_id, s.kind::text AS kind,
                   s.cron_fields, s.every::interval AS every, s.timezone, s.created_at, s.next_slot,
                   s.payload::jsonb AS payload, s.priority::integer AS priority,
                   s.max_attempts::integer AS max_attempts, s.recovery_policy::text AS recovery_policy,
                   s.queue_ttl::interval AS queue_ttl, s.timeout::interval AS timeout
              FROM runq.schedule_settings AS s
             WHERE s.name = ANY (v_names)  -- locked above
        ), due AS (
            SELECT p.*, d.newest, d.next,
                   -- the previous run, if still live (runs_schedule_active_key)
                   (SELECT r.run_id FROM runq.runs AS r
                     WHERE r.schedule = p.name
                       AND r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children')) AS live,
                   (to_jsonb(d.newest AT TIME ZONE 'UTC') #>> '{}') || 'Z' AS slot_text
              FROM picked AS p
             CROSS JOIN LATERAL runq._schedule_due(p.cron_fields, p.timezone, p.every, p.created_at,
                                                   p.next_slot, v_now) AS d
        ), created AS (
            INSERT INTO runq.runs AS r
                   (created_at, updated_at, scheduled_for, expires_at, queue_ttl,
                    max_attempts, priority, recovery_policy, tenant_id, session_id,
                    kind, principal_id, payload, budget, timeout, deadline, schedule)
            SELECT v_now, v_now, NULL, v_now + d.queue_ttl, d.queue_ttl,
                   d.max_attempts, d.priority, d.recovery_policy, d.tenant_id, NULL,
                   d.kind, NULL, d.payload || jsonb_build_object('slot', d.slot_text),
                   NULL, d.timeout, v_now + d.timeout, d.name
              FROM due AS d
             WHERE d.live IS NULL
             ORDER BY d.next_slot, d.name
            ON CONFLICT (schedule)
               WHERE schedule IS NOT NULL AND status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children')
               DO NOTHING  -- the overlap guard
            RETURNING r.run_id, r.schedule
        ), logged AS (
            INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
            SELECT c.run_id, 0, 'run.created',
                   jsonb_build_object('kind', d.kind, 'priority', d.priority,
                                      'schedule', d.name, 'slot', d.slot_text),
                   v_now
              FROM created AS c
              JOIN due AS d ON d.name = c.schedule
        ), handled AS (
            SELECT d.*, c.run_id AS created_id
              FROM due AS d
              LEFT JOIN created AS c ON c.schedule = d.name
        ), advanced AS (
            UPDATE runq.schedule_settings AS s
               SET next_slot = h.next, last_slot = h.newest,
                   last_run_id = coalesce(h.created_id, s.last_run_id)
              FROM handled AS h
             WHERE s.name = h.name
               -- The rows by their key: without it, the generic plan's guess
               -- of the schedules due (a tenth of a third of them) was enough
               -- for a hash join over all of them; an array's guess is ten.
               AND s.name = ANY (v_names)
        )
        SELECT h.name, o.slot, o.run_id, o.outcome
          FROM handled AS h
         CROSS JOIN LATERAL (VALUES
                (0, h.next_slot, NULL::bigint, 'missed'),
                (1, h.newest, coalesce(h.created_id, h.live),
                 CASE WHEN h.created_id IS NOT NULL THEN 'created' ELSE 'skipped_overlap' END))
                AS o (n, slot, run_id, outcome)
         WHERE o.n = 1 OR h.newest > h.next_slot
         ORDER BY h.next_slot, h.name, o.n
    LOOP
        IF outcome = 'skipped_overlap' AND run_id IS NULL THEN
            -- The insert met a run committed after this statement began.
            SELECT r.run_id INTO run_id
              FROM runq.runs AS r
             WHERE r.schedule = tick.schedule
               AND r.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children');
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION runq.tick(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.tick(integer) TO runq_worker, runq_admin;

COMMENT ON FUNCTION runq.tick(integer) IS
$c$Submit the runs of due schedule slots: up to max_runs schedules whose next slot has come and that are not paused (scope schedule), safe from many processes at once (a slot is handled once). Returns (schedule, slot, run_id, outcome): created (a run, as runq.submit makes one, with the schedule's fields and payload plus "slot", ISO 8601 UTC); skipped_overlap (the schedule's previous run, run_id, is still queued, running or waiting_for_user: at most one such run per schedule, by a unique index); missed (slots passed while nothing ticked: only the newest due slot runs, and one missed row names the oldest skipped, run_id NULL). Each schedule's next slot is then the first after now.
Raises 22023 (max_runs NULL or below 1).$c$;

COMMIT;
