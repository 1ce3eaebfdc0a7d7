-- Deploy runq:function_create_schedule to pg
-- requires: table_schedule_settings
-- requires: function__schedule_slots
-- requires: function__cron_next
-- requires: argument_checks
-- requires: role_runq_admin

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';

-- Called by operators, or by a deploy that declares its schedules at every
-- start. Creates the schedule, or replaces the one of that name, in one
-- transaction; locks its row (a tick holding it makes this wait for that
-- tick, which is short). Raises 22023 for bad arguments, checked as submit
-- checks a run's (the shared checks of argument_checks, in the order of the
-- arguments) and before anything is written.
--
-- The first slot: cron, the first local time after now that matches (in
-- timezone); every, now + every, and then created_at + k * every in UTC.
-- A replacement keeps the schedule's created_at (the origin of its every
-- slots), last_slot and last_run_id, and takes every other field from the
-- call; the runs created already keep theirs. Its next_slot: kept when cron,
-- every and timezone are all as they were, so a deploy that declares the
-- same schedule again neither skips nor repeats a slot (a due slot stays
-- due, missed ones are still reported); otherwise the new timing's first
-- slot after now (slots of the old timing not yet handled are forgotten, not
-- reported as missed).
CREATE FUNCTION runq.create_schedule(
    name             text,
    tenant_id        text,
    kind             text,
    cron             text        DEFAULT NULL,
    every            interval    DEFAULT NULL,
    payload          jsonb       DEFAULT '{}',
    priority         integer     DEFAULT 10,
    timezone         text        DEFAULT 'UTC',
    max_attempts     integer     DEFAULT 3,
    recovery_policy  text        DEFAULT 'resume',
    queue_ttl        interval    DEFAULT NULL,
    timeout          interval    DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    -- The set runq._check_timezone refuses abbreviations from, and tick reads
    -- zones under.
    SET timezone_abbreviations = 'Default'
AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_fields  bigint[];
    v_old     record;
BEGIN
    -- Each check is true or raises 22023 naming the argument and its value
    -- (deploy/argument_checks), in the order of the arguments. An IF runs them
    -- as one expression; a PERFORM would run them as a statement of its own.
    -- An every is also refused with a negative part ('1 month -10 days'):
    -- its slots would not always grow.
    IF runq._check_identifier('name', create_schedule.name)
       AND runq._check_identifier('tenant_id', create_schedule.tenant_id)
       AND runq._check_identifier('kind', create_schedule.kind)
       AND (CASE WHEN (create_schedule.cron IS NULL) <> (create_schedule.every IS NULL) THEN true
                ELSE runq._bad_argument('exactly one of cron and every', 'given',
                                        format('cron %s and every %s',
                                               quote_nullable(left(create_schedule.cron, 100)),
                                               quote_nullable(create_schedule.every))) END)
       AND (create_schedule.cron IS NULL OR runq._check_cron('cron', create_schedule.cron))
       AND runq._check_duration('every', create_schedule.every)
       AND (CASE WHEN create_schedule.every IS NULL
                   OR (extract(year FROM create_schedule.every) >= 0
                       AND extract(month FROM create_schedule.every) >= 0
                       AND extract(day FROM create_schedule.every) >= 0
                       AND create_schedule.every
                           - make_interval(years => extract(year FROM create_schedule.every)::integer,
                                           months => extract(month FROM create_schedule.every)::integer,
                                           days => extract(day FROM create_schedule.every)::integer)
                           >= interval '0') THEN true
                ELSE runq._bad_argument('every', 'an interval without a negative part',
                                        create_schedule.every) END)
       AND runq._check_object('payload', create_schedule.payload)
       AND (CASE WHEN create_schedule.priority BETWEEN 0 AND 32767 THEN true
                ELSE runq._bad_argument('priority', 'between 0 and 32767', create_schedule.priority) END)
       -- _check_timezone reads pg_timezone_names, all of the zone database
       -- (30 ms): UTC, and a zone a schedule already has, are known good.
       AND (create_schedule.timezone = 'UTC'
            OR EXISTS (SELECT FROM runq.schedule_settings AS s
                        WHERE s.timezone = create_schedule.timezone)
            OR runq._check_timezone('timezone', create_schedule.timezone))
       AND runq._check_count('max_attempts', create_schedule.max_attempts)
       AND runq._check_choice('recovery_policy', create_schedule.recovery_policy, 'resume, fail, zero_work')
       AND runq._check_duration('queue_ttl', create_schedule.queue_ttl)
       AND runq._check_duration('timeout', create_schedule.timeout) THEN
    END IF;

    v_fields := CASE WHEN create_schedule.cron IS NOT NULL
                     THEN runq._cron_fields('cron', create_schedule.cron) END;

    -- The row inserted, or locked and replaced. An insert that meets a row a
    -- concurrent create committed since the look goes round again, and
    -- replaces it.
    LOOP
        SELECT s.cron, s.every::text AS every, s.timezone INTO v_old
          FROM runq.schedule_settings AS s
         WHERE s.name = create_schedule.name
           FOR UPDATE;
        EXIT WHEN FOUND;
        INSERT INTO runq.schedule_settings
               (name, tenant_id, kind, cron, cron_fields, every, timezone, payload, priority,
                max_attempts,
                recovery_policy, queue_ttl, timeout, created_at, next_slot)
        VALUES (create_schedule.name, create_schedule.tenant_id, create_schedule.kind,
                create_schedule.cron, v_fields, create_schedule.every, create_schedule.timezone,
                create_schedule.payload, create_schedule.priority, create_schedule.max_attempts,
                create_schedule.recovery_policy, create_schedule.queue_ttl, create_schedule.timeout,
                v_now,
                runq._schedule_after(v_fields, create_schedule.timezone,
                                     create_schedule.every, v_now, v_now))
            ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
    END LOOP;

    UPDATE runq.schedule_settings AS s
       SET tenant_id = create_schedule.tenant_id, kind = create_schedule.kind,
           cron = create_schedule.cron, cron_fields = v_fields, every = create_schedule.every,
           timezone = create_schedule.timezone, payload = create_schedule.payload,
           priority = create_schedule.priority, max_attempts = create_schedule.max_attempts,
           recovery_policy = create_schedule.recovery_policy,
           queue_ttl = create_schedule.queue_ttl, timeout = create_schedule.timeout,
           -- interval's = says '1 mon' = '30 days': the text tells them apart
           next_slot = CASE WHEN v_old.cron IS NOT DISTINCT FROM create_schedule.cron
                             AND v_old.every IS NOT DISTINCT FROM create_schedule.every::text
                             AND lower(v_old.timezone) = lower(create_schedule.timezone)
                            THEN s.next_slot
                            -- After the lock: a tick that held it may have
                            -- handled a slot after v_now meanwhile.
                            ELSE runq._schedule_after(v_fields, create_schedule.timezone,
                                                      create_schedule.every, s.created_at,
                                                      greatest(clock_timestamp(), s.last_slot))
                       END
     WHERE s.name = create_schedule.name;
    RETURN false;
END
$$;

REVOKE ALL ON FUNCTION runq.create_schedule(text, text, text, text, interval, jsonb, integer, text, integer, text, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runq.create_schedule(text, text, text, text, interval, jsonb, integer, text, integer, text, interval, interval)
    TO runq_admin;

COMMENT ON FUNCTION runq.create_schedule(text, text, text, text, interval, jsonb, integer, text, integer, text, interval, interval) IS
$c$Create a schedule, or replace the one of that name: runq.tick submits a run of tenant_id and kind for each of its slots, with payload plus "slot" (the slot, ISO 8601 UTC), priority, max_attempts, recovery_policy, queue_ttl and timeout as runq.submit takes them. True when created, false when replaced.
Exactly one of cron and every. cron: five fields (minute, hour, day of month, month, day of week; *, lists, ranges, steps, names, 0 or 7 for Sunday; both day fields restricted: either matches), read in timezone: a local time that does not exist is skipped, one that occurs twice fires once, at its first occurrence. every: slots at creation + k * every (k >= 1), counted in UTC; the first one interval after creation.
A replacement keeps the schedule's creation time, last_slot and last_run_id, and its next slot when cron, every and timezone are unchanged; otherwise the next slot is the new timing's first after now.
Raises 22023 (bad argument: both or neither of cron and every, a bad cron expression, an every not positive or with a negative part, an unknown time zone, and as runq.submit).$c$;

COMMIT;
