-- Deploy runq:function__schedule_slots to pg
-- requires: schema_runq
-- requires: function__cron_next

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
-- A SQL-standard body binds its names now, for good (deploy/argument_checks).
SET LOCAL search_path = pg_catalog, pg_temp;

-- The slots of a schedule (docs/contract.md "Schedules"), for
-- runq.create_schedule and runq.tick:
--
--   runq._every_slot(created_at, every, k)        created_at + k * every, in UTC
--   runq._every_k(created_at, every, after)        the first k >= 1 after `after`
--   runq._schedule_after(cron_fields, timezone, every, created_at, after)
--                                                  the first slot after `after`
--   runq._schedule_due(cron_fields, timezone, every, created_at, slot, until)
--                                                  the newest slot due, and the next
--
-- A cron schedule's slots are runq._cron_walk's over its parsed expression
-- (runq._cron_fields: read in the schedule's time zone, DST gaps skipped,
-- repeated local times once). An
-- every schedule's slots are created_at + k * every for k >= 1, the interval
-- added to created_at's UTC time: '1 day' is 24 hours and '1 month' a
-- calendar month of UTC, whatever the session's TimeZone (timestamptz +
-- interval reads TimeZone, so a tick run from a session in Europe/Paris would
-- otherwise shift the slots across a DST change). A wall-clock time in a
-- zone is what cron is for. create_schedule refuses an every with a negative
-- part ('1 month -10 days'), so the slots only ever grow.

-- created_at + k * every, counted in UTC.
CREATE FUNCTION runq._every_slot(created_at timestamptz, every interval, k bigint)
    RETURNS timestamptz
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN ((created_at AT TIME ZONE 'UTC') + every * k::double precision) AT TIME ZONE 'UTC';

-- The first k >= 1 whose slot is strictly after `after`; NULL when `after`
-- is NULL or infinite. A guess from the lengths in seconds (extract counts a
-- month as 30 days), then a step at a time to the exact k: a few steps
-- however long ago the schedule was created.
CREATE FUNCTION runq._every_k(created_at timestamptz, every interval, after timestamptz)
    RETURNS bigint
    LANGUAGE plpgsql
    IMMUTABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_k bigint;
BEGIN
    IF after IS NULL OR NOT isfinite(after) THEN
        RETURN NULL;
    END IF;
    v_k := greatest(1, floor(extract(epoch FROM after - created_at) / extract(epoch FROM every))::bigint);
    WHILE v_k > 1 AND runq._every_slot(created_at, every, v_k - 1) > after LOOP
        v_k := v_k - 1;
    END LOOP;
    WHILE runq._every_slot(created_at, every, v_k) <= after LOOP
        v_k := v_k + 1;
    END LOOP;
    RETURN v_k;
END
$$;

-- The schedule's first slot strictly after `after`: 'infinity' when its cron
-- expression matches no local time within runq._cron_walk's 41 years (an
-- expression whose every match falls into DST gaps), so that it is never due.
CREATE FUNCTION runq._schedule_after(cron_fields bigint[], timezone text, every interval,
                                     created_at timestamptz, after timestamptz)
    RETURNS timestamptz
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF every IS NOT NULL THEN
        RETURN runq._every_slot(created_at, every, runq._every_k(created_at, every, after));
    END IF;
    RETURN coalesce(runq._cron_walk(cron_fields, timezone, after), 'infinity'::timestamptz);
END
$$;

-- For a schedule whose slot `slot` (its next_slot) is at or before `until`
-- (tick's now): newest, the newest slot at or before `until` (slot itself
-- unless slots were missed), and next, the first slot after `until`.
-- A cron schedule on time costs one runq._cron_walk. One that missed slots is
-- searched by halving: f(t) = _cron_walk(t), the first slot after t, grows
-- with t, and the newest slot S <= until is the one with f(t) <= until
-- exactly when t < S; the search keeps f(lo) <= until < f(hi) and halves
-- [lo, hi] down to a second, under the minute between two slots, so that
-- f(lo) = S: some 25 calls for a year missed, never a walk over the slots.
CREATE FUNCTION runq._schedule_due(cron_fields bigint[], timezone text, every interval,
                                   created_at timestamptz, slot timestamptz, until timestamptz,
                                   OUT newest timestamptz, OUT next timestamptz)
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_k    bigint;
    v_lo   timestamptz;
    v_hi   timestamptz;
    v_mid  timestamptz;
BEGIN
    IF every IS NOT NULL THEN
        -- slot <= until, so the first slot after until is k >= 2
        v_k := runq._every_k(created_at, every, until);
        newest := greatest(slot, runq._every_slot(created_at, every, v_k - 1));
        next := runq._every_slot(created_at, every, v_k);
        RETURN;
    END IF;
    newest := slot;
    next := coalesce(runq._cron_walk(cron_fields, timezone, slot), 'infinity'::timestamptz);
    IF next > until THEN
        RETURN;  -- on time: slot is the newest due
    END IF;
    v_lo := slot;    -- f(lo) = next <= until
    v_hi := until;   -- f(hi) > until
    WHILE v_hi - v_lo > interval '1 second' LOOP
        v_mid := v_lo + (v_hi - v_lo) / 2;
        IF runq._cron_walk(cron_fields, timezone, v_mid) <= until THEN
            v_lo := v_mid;
        ELSE
            v_hi := v_mid;
        END IF;
    END LOOP;
    newest := runq._cron_walk(cron_fields, timezone, v_lo);
    next := coalesce(runq._cron_walk(cron_fields, timezone, newest), 'infinity'::timestamptz);
END
$$;

REVOKE ALL ON FUNCTION runq._every_slot(timestamptz, interval, bigint),
    runq._every_k(timestamptz, interval, timestamptz),
    runq._schedule_after(bigint[], text, interval, timestamptz, timestamptz),
    runq._schedule_due(bigint[], text, interval, timestamptz, timestamptz, timestamptz)
    FROM PUBLIC;

COMMENT ON FUNCTION runq._every_slot(timestamptz, interval, bigint) IS
    'Internal: slot k of an every schedule, created_at + k * every, the interval added in UTC.';
COMMENT ON FUNCTION runq._every_k(timestamptz, interval, timestamptz) IS
    'Internal: the first k >= 1 whose every slot (runq._every_slot) is strictly after after; NULL when after is NULL or infinite.';
COMMENT ON FUNCTION runq._schedule_after(bigint[], text, interval, timestamptz, timestamptz) IS
    'Internal: a schedule''s first slot strictly after after (cron: runq._cron_walk in timezone; every: runq._every_slot); infinity when its cron matches nothing.';
COMMENT ON FUNCTION runq._schedule_due(bigint[], text, interval, timestamptz, timestamptz, timestamptz) IS
    'Internal: for a schedule whose slot is at or before until, the newest slot at or before until and the first slot after it (infinity when none).';

COMMIT;
