-- Deploy runq:function__cron_next to pg
-- requires: argument_checks

BEGIN;

SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '10s';
SET LOCAL search_path = pg_catalog, pg_temp;

-- The cron side of schedules (docs/contract.md "Schedules"): the rules of a cron
-- expression, defined once, and the next slot of one in a time zone.
--
--   runq._cron_fields(argument, cron)   the expression parsed, or 22023
--   runq._check_cron(argument, cron)    true, or 22023 (create_schedule)
--   runq._check_timezone(argument, tz)  true, or 22023 (create_schedule)
--   runq._next_bit(mask, from)          the next minute or hour of a field
--   runq._cron_walk(fields, tz, after)  the first slot strictly after `after`
--   runq._cron_next(cron, tz, after)    the same from the expression's text
--
-- The grammar is Vixie cron's five fields: minute (0-59), hour (0-23), day
-- of month (1-31), month (1-12 or jan-dec) and day of week (0-7 or sun-sat,
-- 0 and 7 both Sunday), names in any case. A field is a comma-separated list
-- of elements; an element is `*`, a value or a range `a-b`, each optionally
-- followed by a step `/n` (1 to the field's largest value); a value with a
-- step, `5/15`, means `5-<largest>/15`, as in Vixie cron. When both day
-- fields are restricted (neither starts with `*`) a day matches either of
-- them (Vixie's OR rule); otherwise it must match both.

-- The expression parsed: its five fields as bit sets, in a bigint[] of six
-- {minutes (bits 0-59), hours (bits 0-23), days of month (bits 1-31), months
-- (bits 1-12), days of week (bits 0-6, Sunday 0), 1 when a day matches either
-- day field, else 0}. Raises 22023 through runq._bad_argument, naming the
-- argument, the expression and the element at fault, for: a NULL, a count of
-- fields other than five, an element outside the grammar, a value out of its
-- field's range or a name of another field, a step of 0 or over the field's
-- largest value, a range from high to low, and an expression no day can
-- match (days of month that none of its months has, as `0 0 30 2 *`).
-- IMMUTABLE as the other argument checks are: it reads nothing but its
-- arguments (so, as with them, never call it with a constant bad value in a
-- branch not taken: the planner folds such a call).
CREATE FUNCTION runq._cron_fields(argument text, cron text)
    RETURNS bigint[]
    LANGUAGE plpgsql
    IMMUTABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_names constant text[] := ARRAY['minute', 'hour', 'day of month', 'month', 'day of week'];
    c_lows constant integer[] := ARRAY[0, 0, 1, 1, 0];
    c_highs constant integer[] := ARRAY[59, 23, 31, 12, 7];
    c_ranges constant text[] := ARRAY['minutes from 0 to 59', 'hours from 0 to 23',
                                      'days of month from 1 to 31', 'months from 1 to 12 or jan to dec',
                                      'days of week from 0 to 7 or sun to sat'];
    c_months constant text[] := ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun',
                                      'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
    c_days constant text[] := ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
    v_shown constant text := quote_nullable(left(cron, 100));
    v_fields text[];
    v_masks bigint[] := ARRAY[0, 0, 0, 0, 0]::bigint[];
    v_element text;
    v_parts text[];
    v_bounds integer[];
    v_value text;
    v_number integer;
    v_step integer;
    v_either boolean;
BEGIN
    v_fields := regexp_split_to_array(btrim(cron, E' \t\r\n'), E'\\s+');
    IF cardinality(v_fields) IS DISTINCT FROM 5 THEN
        PERFORM runq._bad_argument(argument,
            'five fields: minute, hour, day of month, month and day of week', v_shown);
    END IF;
    FOR v_field IN 1 .. 5 LOOP
        FOREACH v_element IN ARRAY string_to_array(v_fields[v_field], ',') LOOP
            -- *, a value or a range; then an optional step
            v_parts := regexp_match(lower(v_element),
                                    '^(?:(\*)|([a-z0-9]+)(?:-([a-z0-9]+))?)(?:/([0-9]+))?$');
            IF v_parts IS NULL THEN
                PERFORM runq._bad_argument(argument,
                    'a cron expression whose fields are lists of *, values and ranges, each with an optional /step',
                    format('%s (%s %L)', v_shown, c_names[v_field], left(v_element, 50)));
            END IF;
            IF v_parts[1] IS NOT NULL THEN
                v_bounds := ARRAY[c_lows[v_field], c_highs[v_field]];
            ELSE
                v_bounds := ARRAY[]::integer[];
                FOREACH v_value IN ARRAY ARRAY[v_parts[2], v_parts[3]] LOOP
                    CONTINUE WHEN v_value IS NULL;
                    v_number := CASE
                        WHEN v_value ~ '^[0-9]{1,9}$' THEN v_value::integer
                        WHEN v_field = 4 THEN array_position(c_months, v_value)
                        WHEN v_field = 5 THEN array_position(c_days, v_value) - 1
                    END;
                    IF v_number IS NULL OR v_number NOT BETWEEN c_lows[v_field] AND c_highs[v_field] THEN
                        PERFORM runq._bad_argument(argument,
                            'a cron expression with ' || c_ranges[v_field],
                            format('%s (%s %L)', v_shown, c_names[v_field], left(v_element, 50)));
                    END IF;
                    v_bounds := v_bounds || v_number;
                END LOOP;
                IF cardinality(v_bounds) = 1 THEN
                    -- a value alone is itself; with a step, the start of one to the end
                    v_bounds := v_bounds || CASE WHEN v_parts[4] IS NULL THEN v_bounds[1]
                                                 ELSE c_highs[v_field] END;
                ELSIF v_bounds[2] < v_bounds[1] THEN
                    PERFORM runq._bad_argument(argument,
                        'a cron expression whose ranges run from low to high',
                        format('%s (%s %L)', v_shown, c_names[v_field], left(v_element, 50)));
                END IF;
            END IF;
            v_step := CASE WHEN v_parts[4] IS NULL THEN 1
                           WHEN v_parts[4] ~ '^[0-9]{1,9}$' THEN v_parts[4]::integer END;
            IF v_step IS NULL OR v_step NOT BETWEEN 1 AND c_highs[v_field] THEN
                PERFORM runq._bad_argument(argument,
                    format('a cron expression whose %s steps are from 1 to %s',
                           c_names[v_field], c_highs[v_field]),
                    format('%s (%s %L)', v_shown, c_names[v_field], left(v_element, 50)));
            END IF;
            -- Sunday is bit 0, whether given as 0 or as 7.
            v_masks[v_field] := v_masks[v_field]
                | (SELECT bit_or((1)::bigint << CASE WHEN v_field = 5 THEN v.v % 7 ELSE v.v END)
                     FROM generate_series(v_bounds[1], v_bounds[2], v_step) AS v (v));
        END LOOP;
    END LOOP;
    -- Vixie cron: a day field that starts with * does not restrict.
    v_either := left(v_fields[3], 1) <> '*' AND left(v_fields[5], 1) <> '*';
    -- Under the AND rule, a day can match only if some month has one of the
    -- days of month (February having a 29th, every four years); under the OR
    -- rule every month has every day of week.
    IF NOT v_either AND NOT EXISTS (
            SELECT FROM unnest(ARRAY[31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]) WITH ORDINALITY
                        AS l (days, month)
             WHERE (v_masks[4] >> l.month::integer) & 1 = 1
               AND v_masks[3] & (((1)::bigint << (l.days + 1)) - 2) <> 0) THEN
        PERFORM runq._bad_argument(argument, 'a cron expression that can fire',
            format('%s (none of its months has one of its days of month)', v_shown));
    END IF;
    RETURN v_masks || CASE WHEN v_either THEN (1)::bigint ELSE (0)::bigint END;
END
$$;

-- The argument check of create_schedule's cron: true or 22023, as
-- runq._cron_fields says.
CREATE FUNCTION runq._check_cron(argument text, cron text)
    RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN runq._cron_fields(argument, cron) IS NOT NULL;

-- The argument check of create_schedule's timezone: a name PostgreSQL's time
-- zone database has (pg_timezone_names; any case, as PostgreSQL reads one),
-- so not an abbreviation such as CEST nor a POSIX rule such as 'XYZ-3',
-- which PostgreSQL would also read, the latter with its sign reversed; nor
-- the database's files that are no zone: localtime (the server machine's
-- setting, which may change under a schedule), posixrules and Factory.
-- Nor a zone name that is also an abbreviation (CET, EET, EST, MET, WET,
-- GMT, ...; UTC excepted, which means the same either way): AT TIME ZONE
-- reads an abbreviation first, as a fixed offset, so 'CET' would never
-- change to summer time. The abbreviations are those of the session's
-- timezone_abbreviations, which create_schedule and tick pin to Default.
-- STABLE: the names are the server's time zone files. It reads all of them,
-- some milliseconds: it is for create_schedule, not for a hot path.
-- PL/pgSQL, not a SQL body: a server that inlines the SQL body into a call
-- with constant arguments would fold the raising branch at plan time, and
-- raise for a good zone (PostgreSQL 18 does).
CREATE FUNCTION runq._check_timezone(argument text, timezone text)
    RETURNS boolean
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_timezone_names AS z
                WHERE lower(z.name) = lower(_check_timezone.timezone)
                  AND z.name NOT IN ('localtime', 'posixrules', 'Factory'))
       AND (lower(_check_timezone.timezone) = 'utc'
            OR NOT EXISTS (SELECT FROM pg_catalog.pg_timezone_abbrevs AS a
                            WHERE lower(a.abbrev) = lower(_check_timezone.timezone))) THEN
        RETURN true;
    END IF;
    RETURN runq._bad_argument(argument, 'a time zone name such as UTC or Europe/Paris',
                              quote_nullable(left(_check_timezone.timezone, 100)));
END
$$;

-- The first instant strictly after `after` whose local time in `timezone`
-- matches `cron`; NULL when `after` is NULL or infinite, or when no local
-- time matches in the 41 years from the local day before `after` (only an
-- expression whose every match falls into daylight-saving gaps: every
-- expression runq._cron_fields accepts matches a day at least every 40
-- years, the longest being a 29 February that must also be a Sunday, as
-- `0 0 29 2 */7`). Raises 22023 for a bad cron (runq._cron_fields), a NULL
-- timezone or one PostgreSQL does not know.
--
-- Local times are read in the time zone: one that does not exist (a spring
-- forward gap) is skipped; one that occurs twice (fall back) fires once, at
-- its first occurrence, so when `after` lies between its two occurrences it
-- is not returned again.
--
-- The search walks months, skipping those not in the expression; in one of
-- its months, the matching days in order (one set-based query); in one day,
-- the matching local times after a floor, in order, next hour and next
-- minute from the fields' lists, never minute by minute. For each day the
-- UTC offsets one day before it begins and one day after it ends (a window
-- of three UTC days, which holds the whole local day for any offset from
-- -24 to +24 hours) are read. When they are equal, the day has no transition
-- (time zones change offset at most once in three days), every local time t
-- is the instant t - offset, and the first time after the floor `after` +
-- offset is the answer. When they differ, each candidate local time t is
-- the earliest of t - offset_before and t - offset_after that reads back as
-- t in the zone (neither: t is in a gap and skipped), and the first
-- candidate so found that is after `after` is the answer; the floor, `after`
-- plus the smaller offset, keeps the candidates tried to those within the
-- transition's size of `after`.
--
-- The lowest bit set in mask at or above bit `from` (0-62), NULL when none:
-- the next minute or hour of a field's bit set, without a query. SQL, so
-- that the planner inlines it into the walk's expressions.
CREATE FUNCTION runq._next_bit(mask bigint, "from" integer)
    RETURNS integer
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
RETURN CASE WHEN mask >> "from" <> 0
            THEN "from" + strpos(reverse((mask >> "from")::bit(64)::text), '1') - 1 END;

-- runq._cron_walk is that search over an expression parsed already by
-- runq._cron_fields (a schedule keeps its parsed form: parsing costs more
-- than the walk); runq._cron_next parses, then walks.
CREATE FUNCTION runq._cron_walk(fields bigint[], timezone text, after timestamptz)
    RETURNS timestamptz
    LANGUAGE plpgsql
    STABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_months_searched constant integer := 41 * 12;
    v_fields constant bigint[] := fields;
    v_first_minute constant integer := runq._next_bit(v_fields[1], 0);
    v_first_hour constant integer := runq._next_bit(v_fields[2], 0);
    v_either constant boolean := v_fields[6] = 1;
    v_after_utc timestamp;
    v_start date;
    v_first_month integer;
    v_month_start date;
    v_month_days integer;
    v_month_dow integer;
    v_days integer[];
    v_day_of_month integer;
    v_day date;
    v_offset_before interval;
    v_offset_after interval;
    v_floor timestamp;
    v_hour integer;
    v_minute integer;
    v_local timestamp;
    v_at timestamptz;
BEGIN
    IF timezone IS NULL THEN
        -- raises 22023, as create_schedule's check does; a name PostgreSQL
        -- does not know raises its own 22023 at the first AT TIME ZONE
        PERFORM runq._check_timezone('timezone', _cron_walk.timezone);
    END IF;
    IF after IS NULL OR NOT isfinite(after) THEN
        RETURN NULL;
    END IF;
    v_after_utc := after AT TIME ZONE 'UTC';
    -- The local day before `after`'s: a fall back can bring a local time of
    -- the day before back after it.
    v_start := (after AT TIME ZONE _cron_walk.timezone)::date - 1;
    v_first_month := extract(year FROM v_start)::integer * 12 + extract(month FROM v_start)::integer - 1;
    FOR v_month IN v_first_month .. v_first_month + c_months_searched - 1 LOOP
        CONTINUE WHEN (v_fields[4] >> (v_month % 12 + 1)) & 1 = 0;
        v_month_start := make_date(v_month / 12, v_month % 12 + 1, 1);
        v_month_days := extract(day FROM v_month_start + interval '1 month' - interval '1 day')::integer;
        v_month_dow := extract(dow FROM v_month_start)::integer;
        -- The month's matching days, from v_start's day in its month.
        v_days := ARRAY(
            SELECT d.d FROM generate_series(CASE WHEN v_month = v_first_month
                                                 THEN extract(day FROM v_start)::integer ELSE 1 END,
                                            v_month_days) AS d (d)
             WHERE CASE WHEN v_either
                        THEN (v_fields[3] >> d.d) & 1 = 1 OR (v_fields[5] >> ((v_month_dow + d.d - 1) % 7)) & 1 = 1
                        ELSE (v_fields[3] >> d.d) & 1 = 1 AND (v_fields[5] >> ((v_month_dow + d.d - 1) % 7)) & 1 = 1
                   END
             ORDER BY d.d);
        FOREACH v_day_of_month IN ARRAY v_days LOOP
            v_day := v_month_start + (v_day_of_month - 1);
            v_offset_before := ((v_day - 1)::timestamp AT TIME ZONE 'UTC') AT TIME ZONE _cron_walk.timezone
                               - (v_day - 1)::timestamp;
            v_offset_after := ((v_day + 2)::timestamp AT TIME ZONE 'UTC') AT TIME ZONE _cron_walk.timezone
                              - (v_day + 2)::timestamp;
            -- No local time at or before the floor can be after `after`.
            v_floor := v_after_utc + least(v_offset_before, v_offset_after);
            CONTINUE WHEN (v_day + 1)::timestamp <= v_floor;
            LOOP
                -- The first matching local time of the day after the floor.
                IF v_floor < v_day::timestamp THEN
                    v_hour := v_first_hour;
                    v_minute := v_first_minute;
                ELSE
                    v_hour := extract(hour FROM v_floor)::integer;
                    v_minute := runq._next_bit(v_fields[1], extract(minute FROM v_floor)::integer + 1);
                    IF v_minute IS NULL OR (v_fields[2] >> v_hour) & 1 = 0 THEN
                        v_hour := runq._next_bit(v_fields[2], v_hour + 1);
                        v_minute := v_first_minute;
                    END IF;
                END IF;
                EXIT WHEN v_hour IS NULL;  -- none left this day
                v_local := v_day + make_interval(hours => v_hour, mins => v_minute);
                IF v_offset_before = v_offset_after THEN
                    RETURN (v_local - v_offset_before) AT TIME ZONE 'UTC';
                END IF;
                -- A transition: the first occurrence of v_local, if it has one.
                v_at := (SELECT min(c.at)
                           FROM (VALUES ((v_local - v_offset_before) AT TIME ZONE 'UTC'),
                                        ((v_local - v_offset_after) AT TIME ZONE 'UTC')) AS c (at)
                          WHERE c.at AT TIME ZONE _cron_walk.timezone = v_local);
                IF v_at > after THEN
                    RETURN v_at;
                END IF;
                v_floor := v_local;
            END LOOP;
        END LOOP;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE FUNCTION runq._cron_next(cron text, timezone text, after timestamptz)
    RETURNS timestamptz
    LANGUAGE sql
    STABLE
    PARALLEL SAFE
RETURN runq._cron_walk(runq._cron_fields('cron', cron), timezone, after);

REVOKE ALL ON FUNCTION runq._cron_fields(text, text), runq._check_cron(text, text),
    runq._check_timezone(text, text), runq._next_bit(bigint, integer),
    runq._cron_walk(bigint[], text, timestamptz),
    runq._cron_next(text, text, timestamptz) FROM PUBLIC;

COMMENT ON FUNCTION runq._cron_fields(text, text) IS
    'Internal: a five-field cron expression parsed into bit sets {minutes, hours, days of month, months, days of week, 1 when a day matches either day field (both restricted) else 0}. Raises 22023 naming argument and the element at fault for a bad expression or one that can never fire.';
COMMENT ON FUNCTION runq._check_cron(text, text) IS
    'Internal: true when cron is a valid five-field cron expression that can fire; else raises 22023 naming argument and value.';
COMMENT ON FUNCTION runq._check_timezone(text, text) IS
    'Internal: true when timezone is a time zone name PostgreSQL knows (pg_timezone_names, any case); else raises 22023 naming argument and value.';
COMMENT ON FUNCTION runq._next_bit(bigint, integer) IS
    'Internal: the lowest bit set in mask at or above bit from (0 to 62), NULL when none.';
COMMENT ON FUNCTION runq._cron_walk(bigint[], text, timestamptz) IS
    'Internal: runq._cron_next over an expression parsed by runq._cron_fields.';
COMMENT ON FUNCTION runq._cron_next(text, text, timestamptz) IS
    'Internal: the first instant strictly after after whose local time in timezone matches cron: nonexistent local times skipped, repeated ones at their first occurrence; NULL when after is NULL or infinite or nothing matches within 41 years. Raises 22023 for a bad cron or time zone.';

COMMIT;
