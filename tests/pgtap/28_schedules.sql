-- Schedules (v0.2). runq.create_schedule(name, tenant_id, kind, cron | every,
-- ...): true when created, false when replaced; exactly one of cron and
-- every; every argument checked as submit checks it (22023 naming the
-- argument and the value, nothing changed); cron's first slot is
-- runq._cron_next of creation in the time zone, every's one interval after
-- creation; a replacement keeps created_at, last_slot and last_run_id, and
-- next_slot when cron, every and timezone are unchanged. runq.tick(max_runs):
-- up to max_runs due schedules, soonest slot first, not paused: 'created' (a
-- run as submit makes one: the schedule's fields, payload plus "slot" in ISO
-- 8601 UTC, schedule set, run.created at epoch 0), 'skipped_overlap' naming
-- the schedule's live run (queued, running or waiting_for_user), 'missed'
-- (the oldest skipped slot, run_id NULL) when more than one slot is due, only
-- the newest running; next_slot then the first slot after now, last_slot the
-- newest handled, last_run_id the newest run created. runs_schedule_active_key
-- refuses a second non-terminal run of a schedule (23505); a redrive of a
-- schedule's run while the schedule has another live run raises RQ002 naming
-- it. A paused schedule does not tick, its runs stay claimable. drop_schedule:
-- true, then false. runq_worker may tick but not create, drop or read the
-- view; runq_client nothing (42501). A tick reads a handful of buffers with
-- 100,000 schedules. Slots are made due by moving next_slot (and an every
-- schedule's created_at) back: the functions read the clock. Classes
-- 2800..2899; tenants, kinds and schedules named sc-*.
BEGIN;
SELECT plan(141);

-- The newest 1 January, 00:00 UTC, n years back (0: this year's): the slots
-- of '0 0 1 1 *' in UTC, none of which comes while this file runs.
CREATE FUNCTION pg_temp.new_year(n integer DEFAULT 0) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT (date_trunc('year', now() AT TIME ZONE 'UTC') - make_interval(years => n)) AT TIME ZONE 'UTC'
$$;
-- Make a schedule due at slot.
CREATE PROCEDURE pg_temp.due(p_name text, p_slot timestamptz) LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runq.schedule_settings SET next_slot = p_slot WHERE name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fixture: no schedule %', p_name;
    END IF;
END $$;
-- The ISO 8601 UTC text of a slot, as the payload carries it.
CREATE FUNCTION pg_temp.iso(timestamptz) RETURNS text LANGUAGE sql AS $$
    SELECT to_char($1 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;
-- A tick's rows, kept to compare.
CREATE TEMP TABLE ticked (schedule text, slot timestamptz, run_id bigint, outcome text) ON COMMIT DROP;
GRANT ALL ON ticked TO runq_worker;
CREATE PROCEDURE pg_temp.tick(p_max integer DEFAULT 100) LANGUAGE sql AS $$
    DELETE FROM ticked;
    INSERT INTO ticked SELECT * FROM runq.tick(p_max);
$$;

-- ---------------------------------------------------------------------------
-- structure
-- ---------------------------------------------------------------------------
SELECT has_function('runq', 'create_schedule',
    ARRAY['text', 'text', 'text', 'text', 'interval', 'jsonb', 'integer', 'text', 'integer', 'text', 'interval', 'interval'],
    'runq.create_schedule exists with the signature of the contract');
SELECT has_function('runq', 'drop_schedule', ARRAY['text'], 'runq.drop_schedule(text) exists');
SELECT has_function('runq', 'tick', ARRAY['integer'], 'runq.tick(integer) exists');
SELECT is_definer('runq', 'create_schedule',
    ARRAY['text', 'text', 'text', 'text', 'interval', 'jsonb', 'integer', 'text', 'integer', 'text', 'interval', 'interval'],
    'create_schedule is SECURITY DEFINER');
SELECT is_definer('runq', 'drop_schedule', ARRAY['text'], 'drop_schedule is SECURITY DEFINER');
SELECT is_definer('runq', 'tick', ARRAY['integer'], 'tick is SECURITY DEFINER');
SELECT function_returns('runq', 'tick', ARRAY['integer'], 'setof record', 'tick returns a set of rows');
SELECT is(
    (SELECT pg_catalog.array_agg(a.attname::text || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
       FROM pg_catalog.pg_attribute AS a
      WHERE a.attrelid = 'runq.schedules'::regclass AND a.attnum > 0),
    ARRAY['name text', 'tenant_id text', 'kind text', 'cron text', 'every interval', 'timezone text',
          'next_slot timestamp with time zone', 'last_slot timestamp with time zone', 'last_run_id bigint',
          'paused boolean'],
    'runq.schedules: the columns of the contract, in order');
SELECT is((SELECT pg_catalog.array_agg(p.parameter_name::text ORDER BY p.ordinal_position)
             FROM information_schema.parameters AS p
             JOIN information_schema.routines AS r ON r.specific_name = p.specific_name
            WHERE r.routine_schema = 'runq' AND r.routine_name = 'tick' AND p.parameter_mode = 'OUT'),
          ARRAY['schedule', 'slot', 'run_id', 'outcome'], 'tick returns schedule, slot, run_id, outcome');

-- ---------------------------------------------------------------------------
-- create_schedule: cron and every, the first slot
-- ---------------------------------------------------------------------------
SELECT is(runq.create_schedule('sc-cron', 'sc-t', 'sc-k', cron => '0 9 * * *', timezone => 'Europe/Paris',
                               priority => 2800),
          true, 'create_schedule returns true when it created the schedule');
SELECT results_eq($$SELECT name, tenant_id, kind, cron, every, timezone, last_slot, last_run_id, paused
                      FROM runq.schedules WHERE name = 'sc-cron'$$,
                  $$VALUES ('sc-cron', 'sc-t', 'sc-k', '0 9 * * *', NULL::interval, 'Europe/Paris',
                            NULL::timestamptz, NULL::bigint, false)$$,
                  'runq.schedules shows the new cron schedule, nothing handled, not paused');
SELECT is((SELECT next_slot FROM runq.schedules WHERE name = 'sc-cron'),
          (SELECT runq._cron_next('0 9 * * *', 'Europe/Paris', s.created_at)
             FROM runq.schedule_settings AS s WHERE s.name = 'sc-cron'),
          'cron: the first slot is the first match after creation (runq._cron_next)');
SELECT is((SELECT (next_slot AT TIME ZONE 'Europe/Paris')::time FROM runq.schedules WHERE name = 'sc-cron'),
          '09:00'::time, 'cron: read in the schedule''s time zone (09:00 in Paris)');
SELECT is(runq.create_schedule('sc-every', 'sc-t', 'sc-k', every => interval '1 hour', priority => 2801,
                               payload => '{"report": "hourly"}', max_attempts => 5, recovery_policy => 'fail',
                               queue_ttl => interval '10 minutes', timeout => interval '30 minutes'),
          true, 'create_schedule of an every schedule returns true');
SELECT is((SELECT s.next_slot - s.created_at FROM runq.schedule_settings AS s WHERE s.name = 'sc-every'),
          interval '1 hour', 'every: the first slot is one interval after creation');
SELECT results_eq($$SELECT cron, every, timezone FROM runq.schedules WHERE name = 'sc-every'$$,
                  $$VALUES (NULL::text, interval '1 hour', 'UTC')$$, 'every: no cron, timezone UTC by default');
SELECT results_eq($$SELECT payload::jsonb, priority::integer, max_attempts::integer, recovery_policy::text,
                           queue_ttl::interval, timeout::interval
                      FROM runq.schedule_settings WHERE name = 'sc-every'$$,
                  $$VALUES ('{"report": "hourly"}'::jsonb, 2801, 5, 'fail', interval '10 minutes', interval '30 minutes')$$,
                  'the run fields are stored as given');
SELECT results_eq($$SELECT payload::jsonb, priority::integer, max_attempts::integer, recovery_policy::text,
                           queue_ttl::interval, timeout::interval
                      FROM runq.schedule_settings WHERE name = 'sc-cron'$$,
                  $$VALUES ('{}'::jsonb, 2800, 3, 'resume', NULL::interval, NULL::interval)$$,
                  'the defaults are submit''s: payload {}, max_attempts 3, resume, no queue_ttl or timeout');

-- ---------------------------------------------------------------------------
-- create_schedule: replacement
-- ---------------------------------------------------------------------------
UPDATE runq.schedule_settings SET last_slot = pg_temp.new_year(1), last_run_id = 42,
       next_slot = next_slot - interval '1 day'
 WHERE name = 'sc-cron';  -- fixture: a history, and a slot kept back to tell keeping from computing
SELECT created_at AS cron_created, next_slot AS cron_next FROM runq.schedule_settings WHERE name = 'sc-cron' \gset
SELECT is(runq.create_schedule('sc-cron', 'sc-t2', 'sc-k2', cron => '0 9 * * *', timezone => 'Europe/Paris',
                               priority => 2802, payload => '{"v": 2}'),
          false, 'create_schedule returns false when it replaced the schedule of that name');
SELECT results_eq($$SELECT tenant_id, kind, next_slot, last_slot, last_run_id FROM runq.schedules WHERE name = 'sc-cron'$$,
                  format($$VALUES ('sc-t2', 'sc-k2', %L::timestamptz, %L::timestamptz, 42::bigint)$$,
                         :'cron_next', pg_temp.new_year(1)),
                  'same timing: the new fields; next_slot, last_slot and last_run_id kept');
SELECT results_eq($$SELECT created_at, payload::jsonb, priority::integer FROM runq.schedule_settings WHERE name = 'sc-cron'$$,
                  format($$VALUES (%L::timestamptz, '{"v": 2}'::jsonb, 2802)$$, :'cron_created'),
                  'a replacement keeps created_at and takes payload and priority');
SELECT is(runq.create_schedule('sc-cron', 'sc-t', 'sc-k', cron => '30 9 * * *', timezone => 'Europe/Paris',
                               priority => 2800),
          false, 'a replacement with another cron returns false');
SELECT is((SELECT next_slot FROM runq.schedules WHERE name = 'sc-cron'),
          runq._cron_next('30 9 * * *', 'Europe/Paris', clock_timestamp() - interval '1 second'),
          'another cron: next_slot is the new expression''s first slot after now');
UPDATE runq.schedule_settings SET last_slot = now() + interval '2 days' WHERE name = 'sc-cron';  -- fixture
SELECT runq.create_schedule('sc-cron', 'sc-t', 'sc-k', cron => '45 9 * * *', timezone => 'Europe/Paris',
                            priority => 2800);
SELECT is((SELECT next_slot FROM runq.schedules WHERE name = 'sc-cron'),
          runq._cron_next('45 9 * * *', 'Europe/Paris', now() + interval '2 days'),
          'another cron: never a slot at or before last_slot (a tick holding the row while the '
          'replace waited may have handled one after the replace began)');
SELECT is((SELECT last_run_id FROM runq.schedules WHERE name = 'sc-cron'), 42::bigint,
          'another cron: last_run_id still kept');
SELECT created_at AS every_created FROM runq.schedule_settings WHERE name = 'sc-every' \gset
UPDATE runq.schedule_settings SET created_at = created_at - interval '100 minutes', next_slot = next_slot - interval '100 minutes'
 WHERE name = 'sc-every';  -- fixture: created 100 minutes earlier, its slot not yet handled
SELECT is(runq.create_schedule('sc-every', 'sc-t', 'sc-k', every => interval '30 minutes', priority => 2801),
          false, 'a replacement of every returns false');
SELECT is((SELECT s.next_slot - s.created_at FROM runq.schedule_settings AS s WHERE s.name = 'sc-every'),
          interval '120 minutes',
          'another every: the first slot after now counted from the kept created_at (created + 4 x 30 min)');
SELECT runq.create_schedule('sc-month', 'sc-t', 'sc-k', every => interval '30 days', priority => 2803);
SELECT next_slot AS month_next FROM runq.schedule_settings WHERE name = 'sc-month' \gset
UPDATE runq.schedule_settings SET created_at = created_at - interval '40 days' WHERE name = 'sc-month';  -- fixture
SELECT runq.create_schedule('sc-month', 'sc-t', 'sc-k', every => interval '30 days', priority => 2803);
SELECT is((SELECT next_slot FROM runq.schedule_settings WHERE name = 'sc-month'), :'month_next'::timestamptz,
          'every unchanged: next_slot kept');
SELECT runq.create_schedule('sc-month', 'sc-t', 'sc-k', every => interval '1 month', priority => 2803);
SELECT is((SELECT next_slot FROM runq.schedule_settings AS s WHERE s.name = 'sc-month'),
          (SELECT ((s.created_at AT TIME ZONE 'UTC') + interval '2 months') AT TIME ZONE 'UTC'
             FROM runq.schedule_settings AS s WHERE s.name = 'sc-month'),
          '''1 month'' is another every than ''30 days'' (equal as intervals): recomputed, calendar months in UTC');

-- ---------------------------------------------------------------------------
-- create_schedule, drop_schedule, tick: bad arguments raise 22023 and change nothing
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE before_errors ON COMMIT DROP AS SELECT * FROM runq.schedule_settings;
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '* * * * *', every => interval '1 hour')$$,
                 '22023', 'exactly one of cron and every must be given, got cron ''* * * * *'' and every ''01:00:00''',
                 'both cron and every: 22023 naming both');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k')$$,
                 '22023', 'exactly one of cron and every must be given, got cron NULL and every NULL',
                 'neither cron nor every: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '* * *')$$,
                 '22023', 'cron must be five fields: minute, hour, day of month, month and day of week, got ''* * *''',
                 'a cron of three fields: 22023 naming cron and the expression');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '61 * * * *')$$,
                 '22023', NULL, 'a cron minute of 61: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '0 0 30 2 *')$$,
                 '22023', NULL, 'a cron that can never fire (30 February): 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '* * * * *', timezone => 'Mars/Olympus')$$,
                 '22023', 'timezone must be a time zone name such as UTC or Europe/Paris, got ''Mars/Olympus''',
                 'an unknown time zone: 22023 naming it');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '* * * * *', timezone => 'CET')$$,
                 '22023', 'timezone must be a time zone name such as UTC or Europe/Paris, got ''CET''',
                 'a zone name that is also an abbreviation (read as a fixed offset): 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '* * * * *', timezone => 'est')$$,
                 '22023', 'timezone must be a time zone name such as UTC or Europe/Paris, got ''est''',
                 'an abbreviation in any case: 22023');
SELECT lives_ok($$SELECT runq.create_schedule('sc-utc', 'sc-t', 'sc-k', cron => '* * * * *', timezone => 'utc') AND runq.drop_schedule('sc-utc')$$,
                'UTC, a name and an abbreviation of the same offset, in any case, is a zone');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', cron => '* * * * *', timezone => NULL)$$,
                 '22023', NULL, 'a NULL time zone: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '0')$$,
                 '22023', 'every must be positive and under 1000 years, got 00:00:00', 'every 0: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '-1 hour')$$,
                 '22023', NULL, 'a negative every: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 month -10 days')$$,
                 '22023', 'every must be an interval without a negative part, got 1 mon -10 days',
                 'an every with a negative part: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', priority => 40000)$$,
                 '22023', 'priority must be between 0 and 32767, got 40000', 'priority out of range: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', priority => -1)$$,
                 '22023', NULL, 'a negative priority: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', payload => '[]')$$,
                 '22023', 'payload must be a jsonb object, got array', 'a payload that is no object: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', payload => NULL)$$,
                 '22023', NULL, 'a NULL payload: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', max_attempts => 0)$$,
                 '22023', 'max_attempts must be at least 1, got 0', 'max_attempts 0: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', recovery_policy => 'retry')$$,
                 '22023', 'recovery_policy must be one of resume, fail, zero_work, got ''retry''',
                 'an unknown recovery_policy: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', queue_ttl => interval '-1 minute')$$,
                 '22023', NULL, 'a negative queue_ttl: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', 'sc-k', every => interval '1 hour', timeout => interval '0')$$,
                 '22023', NULL, 'timeout 0: 22023');
SELECT throws_ok($$SELECT runq.create_schedule(NULL, 'sc-t', 'sc-k', every => interval '1 hour')$$,
                 '22023', 'name must be 1 to 256 characters, got NULL', 'a NULL name: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('', 'sc-t', 'sc-k', every => interval '1 hour')$$,
                 '22023', NULL, 'an empty name: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', NULL, 'sc-k', every => interval '1 hour')$$,
                 '22023', NULL, 'a NULL tenant_id: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-bad', 'sc-t', repeat('k', 257), every => interval '1 hour')$$,
                 '22023', NULL, 'a kind over 256 characters: 22023');
SELECT throws_ok($$SELECT runq.create_schedule('sc-every', 'sc-t', 'sc-k', every => interval '1 hour', priority => 99999)$$,
                 '22023', NULL, 'a bad replacement: 22023');
SELECT throws_ok($$SELECT runq.drop_schedule(NULL)$$, '22023', 'name must be 1 to 256 characters, got NULL',
                 'drop_schedule of a NULL name: 22023');
SELECT throws_ok($$SELECT * FROM runq.tick(0)$$, '22023', 'max_runs must be at least 1, got 0', 'tick(0): 22023');
SELECT throws_ok($$SELECT * FROM runq.tick(NULL)$$, '22023', NULL, 'tick(NULL): 22023');
SELECT set_eq('SELECT * FROM runq.schedule_settings', 'SELECT * FROM before_errors',
              'the rejected calls changed nothing (no schedule created, none replaced)');
SELECT runq.drop_schedule('sc-month');
SELECT runq.drop_schedule('sc-every');
SELECT runq.drop_schedule('sc-cron');

-- ---------------------------------------------------------------------------
-- tick: nothing due
-- ---------------------------------------------------------------------------
SELECT runq.create_schedule('sc-a', 'sc-ta', 'sc-ka', cron => '0 0 1 1 *', priority => 2810,
                            payload => '{"job": "yearly"}', max_attempts => 4, recovery_policy => 'zero_work',
                            queue_ttl => interval '2 hours', timeout => interval '3 hours');
SELECT is_empty('SELECT * FROM runq.tick()', 'tick: nothing due, no row');
SELECT is((SELECT next_slot FROM runq.schedules WHERE name = 'sc-a'), pg_temp.new_year(-1),
          'a schedule not due keeps its next slot (next 1 January)');

-- ---------------------------------------------------------------------------
-- tick: created
-- ---------------------------------------------------------------------------
CALL pg_temp.due('sc-a', pg_temp.new_year());
SET ROLE runq_worker;
CALL pg_temp.tick();
RESET ROLE;
SELECT run_id AS a1 FROM ticked \gset
SELECT results_eq('SELECT schedule, slot, outcome FROM ticked',
                  format($$VALUES ('sc-a', %L::timestamptz, 'created')$$, pg_temp.new_year()),
                  'created: one row, the slot, outcome created (tick as runq_worker)');
SELECT ok(:a1 IS NOT NULL, 'created: names the new run');
SELECT results_eq(format($$SELECT tenant_id::text, kind::text, priority::integer, max_attempts::integer,
                                  recovery_policy::text, queue_ttl::interval, timeout::interval,
                                  expires_at - created_at, deadline - created_at, session_id::text,
                                  scheduled_for, schedule, status::text, attempts::integer, lease_epoch::bigint
                             FROM runq.runs WHERE run_id = %s$$, :a1),
                  $$VALUES ('sc-ta', 'sc-ka', 2810, 4, 'zero_work', interval '2 hours', interval '3 hours',
                            interval '2 hours', interval '3 hours', NULL::text, NULL::timestamptz, 'sc-a',
                            'queued', 0, 0::bigint)$$,
                  'created: the run has the schedule''s fields as submit stores them, schedule set, queued');
SELECT is((SELECT payload::jsonb FROM runq.runs WHERE run_id = :a1),
          jsonb_build_object('job', 'yearly', 'slot', pg_temp.iso(pg_temp.new_year())),
          'created: the payload plus "slot", the slot in ISO 8601 UTC');
SELECT is((SELECT payload ->> 'slot' FROM runq.runs WHERE run_id = :a1),
          to_char(pg_temp.new_year() AT TIME ZONE 'UTC', 'YYYY') || '-01-01T00:00:00Z',
          'the slot reads YYYY-01-01T00:00:00Z');
SELECT results_eq(format($$SELECT type, epoch, payload FROM runq.run_events(%s)$$, :a1),
                  format($$VALUES ('run.created'::text, 0::bigint, %L::jsonb)$$,
                         jsonb_build_object('kind', 'sc-ka', 'priority', 2810, 'schedule', 'sc-a',
                                            'slot', pg_temp.iso(pg_temp.new_year()))),
                  'created: run.created at epoch 0 naming kind, priority, schedule and slot');
SELECT results_eq($$SELECT next_slot, last_slot, last_run_id FROM runq.schedules WHERE name = 'sc-a'$$,
                  format($$VALUES (%L::timestamptz, %L::timestamptz, %s::bigint)$$,
                         pg_temp.new_year(-1), pg_temp.new_year(), :a1),
                  'created: next_slot past now (the next 1 January), last_slot the slot, last_run_id the run');
SELECT is((SELECT r.created_at FROM runq.runs AS r WHERE r.run_id = :a1) <= clock_timestamp(), true,
          'the run is created now, not at the slot');
SELECT is_empty('SELECT * FROM runq.tick()', 'a second tick finds nothing due: the slot is handled once');

-- ---------------------------------------------------------------------------
-- tick: skipped_overlap while the previous run is queued, running or waiting
-- ---------------------------------------------------------------------------
CALL pg_temp.due('sc-a', pg_temp.new_year());
CALL pg_temp.tick();
SELECT results_eq('SELECT schedule, slot, run_id, outcome FROM ticked',
                  format($$VALUES ('sc-a', %L::timestamptz, %s::bigint, 'skipped_overlap')$$, pg_temp.new_year(), :a1),
                  'skipped_overlap: the previous run is queued; the row names it');
SELECT results_eq($$SELECT next_slot, last_slot, last_run_id FROM runq.schedules WHERE name = 'sc-a'$$,
                  format($$VALUES (%L::timestamptz, %L::timestamptz, %s::bigint)$$,
                         pg_temp.new_year(-1), pg_temp.new_year(), :a1),
                  'skipped_overlap: next_slot advanced, last_slot the slot, last_run_id still the live run');
SELECT is((SELECT count(*) FROM runq.runs WHERE schedule = 'sc-a'), 1::bigint, 'skipped_overlap: no new run');
SELECT is((SELECT c.run_id FROM runq.claim(ARRAY[2810], lease => interval '1 hour') AS c), :a1::bigint,
          '(the run is claimed)');
CALL pg_temp.due('sc-a', pg_temp.new_year());
CALL pg_temp.tick();
SELECT results_eq('SELECT run_id, outcome FROM ticked', format($$VALUES (%s::bigint, 'skipped_overlap')$$, :a1),
                  'skipped_overlap: the previous run is running');
SELECT is(runq.ask_user(:a1, 1, '{"q": "go on?"}'), true, '(the run waits for the user)');
CALL pg_temp.due('sc-a', pg_temp.new_year());
CALL pg_temp.tick();
SELECT results_eq('SELECT run_id, outcome FROM ticked', format($$VALUES (%s::bigint, 'skipped_overlap')$$, :a1),
                  'skipped_overlap: the previous run is waiting_for_user');
SELECT is(runq.deliver_input(:a1, '{"a": "yes"}'), true, '(input delivered: queued again)');
SELECT is((SELECT c.run_id FROM runq.claim(ARRAY[2810], lease => interval '1 hour') AS c), :a1::bigint,
          '(claimed again)');
SELECT is(runq.complete(:a1, 2), true, '(the run succeeds)');
CALL pg_temp.due('sc-a', pg_temp.new_year());
CALL pg_temp.tick();
SELECT run_id AS a2 FROM ticked \gset
SELECT results_eq('SELECT outcome FROM ticked', $$VALUES ('created')$$,
                  'the previous run terminal: the next due slot creates a run');
SELECT ok(:a2 > :a1, 'created: a new run');
SELECT is((SELECT last_run_id FROM runq.schedules WHERE name = 'sc-a'), :a2::bigint,
          'last_run_id: the newest run created');

-- ---------------------------------------------------------------------------
-- runs_schedule_active_key: at most one non-terminal run per schedule
-- ---------------------------------------------------------------------------
SELECT throws_ok($$INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind, schedule)
                   VALUES (now(), now(), 2810, 'sc-ta', 'sc-ka', 'sc-a')$$,
                 '23505', NULL, 'a second queued run of a schedule is refused by runs_schedule_active_key');
SELECT lives_ok($$INSERT INTO runq.runs (created_at, updated_at, finished_at, status, result, priority, tenant_id, kind, schedule)
                  VALUES (now(), now(), now(), 'succeeded', NULL, 2810, 'sc-ta', 'sc-ka', 'sc-a')$$,
                'a terminal run of the schedule takes no place in the index');
SELECT lives_ok($$INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)
                  VALUES (now(), now(), 2899, 'sc-ta', 'sc-ka'), (now(), now(), 2899, 'sc-ta', 'sc-ka')$$,
                'runs without a schedule never conflict');

-- ---------------------------------------------------------------------------
-- redrive of a schedule's run while the schedule has another live run: RQ002
-- ---------------------------------------------------------------------------
SELECT is((SELECT c.run_id FROM runq.claim(ARRAY[2810], lease => interval '1 hour') AS c), :a2::bigint,
          '(the second run is claimed)');
SELECT is(runq.fail(:a2, 1, '{"code": "boom"}'), true, '(and fails)');
CALL pg_temp.due('sc-a', pg_temp.new_year());
CALL pg_temp.tick();
SELECT run_id AS a3 FROM ticked \gset
SELECT results_eq('SELECT outcome FROM ticked', $$VALUES ('created')$$, 'a failed run is terminal: a third run is created');
SELECT throws_ok(format('SELECT runq.redrive(%s)', :a2), 'RQ002',
                 format('schedule sc-a already has active run %s', :a3),
                 'redrive of the failed run while the schedule has a live run: RQ002 naming the schedule and that run');
SELECT is((SELECT status FROM runq.get_run(:a2)), 'failed', 'the refused redrive changed nothing');
SELECT is(runq.cancel(:a3), 'cancelled', '(the live run is cancelled)');
SELECT is(runq.redrive(:a2), true, 'once the schedule has no live run, the redrive applies');
CALL pg_temp.due('sc-a', pg_temp.new_year());
CALL pg_temp.tick();
SELECT results_eq('SELECT run_id, outcome FROM ticked', format($$VALUES (%s::bigint, 'skipped_overlap')$$, :a2),
                  'the redriven run is the schedule''s live run: skipped_overlap names it');
SELECT is(runq.cancel(:a2), 'cancelled', '(cancelled, the schedule is free)');

-- ---------------------------------------------------------------------------
-- tick: missed slots
-- ---------------------------------------------------------------------------
CALL pg_temp.due('sc-a', pg_temp.new_year(3));
CALL pg_temp.tick();
SELECT run_id AS a4 FROM ticked WHERE outcome = 'created' \gset
SELECT results_eq('SELECT schedule, slot, run_id, outcome FROM ticked',
                  format($$VALUES ('sc-a', %L::timestamptz, NULL::bigint, 'missed'),
                                  ('sc-a', %L::timestamptz, %s::bigint, 'created')$$,
                         pg_temp.new_year(3), pg_temp.new_year(), :a4),
                  'missed: three slots due; one missed row (the oldest skipped, no run), then the newest created');
SELECT is((SELECT payload ->> 'slot' FROM runq.runs WHERE run_id = :a4), pg_temp.iso(pg_temp.new_year()),
          'missed: the run is the newest slot''s');
SELECT results_eq($$SELECT next_slot, last_slot, last_run_id FROM runq.schedules WHERE name = 'sc-a'$$,
                  format($$VALUES (%L::timestamptz, %L::timestamptz, %s::bigint)$$,
                         pg_temp.new_year(-1), pg_temp.new_year(), :a4),
                  'missed: next_slot past now, last_slot the newest slot handled');
CALL pg_temp.due('sc-a', pg_temp.new_year(2));
CALL pg_temp.tick();
SELECT results_eq('SELECT slot, run_id, outcome FROM ticked',
                  format($$VALUES (%L::timestamptz, NULL::bigint, 'missed'), (%L::timestamptz, %s::bigint, 'skipped_overlap')$$,
                         pg_temp.new_year(2), pg_temp.new_year(), :a4),
                  'missed and skipped_overlap: the newest slot is skipped for the live run');
SELECT is(runq.cancel(:a4), 'cancelled', '(cancelled)');

-- every: created 3.5 intervals ago, nothing handled since
SELECT runq.create_schedule('sc-e', 'sc-t', 'sc-k', every => interval '1 hour', priority => 2811);
UPDATE runq.schedule_settings SET created_at = created_at - interval '210 minutes',
       next_slot = next_slot - interval '210 minutes'
 WHERE name = 'sc-e';  -- fixture: created three and a half hours ago
SELECT created_at AS e_created FROM runq.schedule_settings WHERE name = 'sc-e' \gset
CALL pg_temp.tick();
SELECT run_id AS e1 FROM ticked WHERE outcome = 'created' \gset
SELECT results_eq('SELECT schedule, slot, outcome FROM ticked',
                  format($$VALUES ('sc-e', %L::timestamptz + interval '1 hour', 'missed'),
                                  ('sc-e', %L::timestamptz + interval '3 hours', 'created')$$,
                         :'e_created', :'e_created'),
                  'every: slots at created + 1 h, 2 h, 3 h due: created + 1 h reported missed, created + 3 h runs');
SELECT is((SELECT next_slot FROM runq.schedules WHERE name = 'sc-e'), :'e_created'::timestamptz + interval '4 hours',
          'every: next_slot is created_at + k * every, the first k past now');
SELECT is((SELECT payload ->> 'slot' FROM runq.runs WHERE run_id = :e1),
          (to_jsonb((:'e_created'::timestamptz + interval '3 hours') AT TIME ZONE 'UTC') #>> '{}') || 'Z',
          'every: the slot in the payload keeps its fraction of a second');
SELECT is(runq.cancel(:e1), 'cancelled', '(cancelled)');

-- ---------------------------------------------------------------------------
-- tick: max_runs, soonest slot first
-- ---------------------------------------------------------------------------
SELECT runq.create_schedule('sc-m1', 'sc-t', 'sc-k', cron => '0 0 1 1 *', priority => 2820);
SELECT runq.create_schedule('sc-m2', 'sc-t', 'sc-k', cron => '0 0 1 1 *', priority => 2820);
SELECT runq.create_schedule('sc-m3', 'sc-t', 'sc-k', cron => '0 0 1 1 *', priority => 2820);
UPDATE runq.schedule_settings SET next_slot = pg_temp.new_year()
 WHERE name IN ('sc-m1', 'sc-m2', 'sc-m3');  -- fixture: three due at one slot
CALL pg_temp.tick(2);
SELECT results_eq('SELECT schedule, outcome FROM ticked', $$VALUES ('sc-m1', 'created'), ('sc-m2', 'created')$$,
                  'tick(2): two schedules, by slot then name');
CALL pg_temp.tick(2);
SELECT results_eq('SELECT schedule, outcome FROM ticked', $$VALUES ('sc-m3', 'created')$$,
                  'the next tick takes the third');

-- ---------------------------------------------------------------------------
-- pause: a paused schedule does not tick; its runs stay claimable
-- ---------------------------------------------------------------------------
SELECT is(runq.pause('schedule', 'sc-m1', 'maintenance'), true, '(sc-m1 paused)');
SELECT is((SELECT paused FROM runq.schedules WHERE name = 'sc-m1'), true, 'runq.schedules shows it paused');
SELECT is((SELECT paused FROM runq.schedules WHERE name = 'sc-m2'), false, 'and the others not');
UPDATE runq.schedule_settings SET next_slot = pg_temp.new_year()
 WHERE name IN ('sc-m1', 'sc-m2');  -- fixture: due again
CALL pg_temp.tick();
SELECT results_eq('SELECT schedule, outcome FROM ticked', $$VALUES ('sc-m2', 'skipped_overlap')$$,
                  'tick passes over the paused schedule');
SELECT is((SELECT next_slot FROM runq.schedules WHERE name = 'sc-m1'), pg_temp.new_year(),
          'the paused schedule''s due slot waits');
SELECT is((SELECT count(*) FROM runq.claim(ARRAY[2820], max_runs => 3) AS c
            JOIN runq.runs AS r ON r.run_id = c.run_id
           WHERE r.schedule IN ('sc-m1', 'sc-m2', 'sc-m3')), 3::bigint,
          'the runs a paused schedule created are claimable, as every run');
SELECT is(runq.resume('schedule', 'sc-m1'), true, '(sc-m1 resumed)');
CALL pg_temp.tick();
SELECT results_eq('SELECT schedule, outcome FROM ticked', $$VALUES ('sc-m1', 'skipped_overlap')$$,
                  'resumed: its due slot is handled (its run is running: skipped_overlap)');

-- ---------------------------------------------------------------------------
-- drop_schedule
-- ---------------------------------------------------------------------------
SELECT is(runq.drop_schedule('sc-m3'), true, 'drop_schedule returns true when it dropped');
SELECT is(runq.drop_schedule('sc-m3'), false, 'drop_schedule returns false when there is none');
SELECT is_empty($$SELECT * FROM runq.schedules WHERE name = 'sc-m3'$$, 'the dropped schedule is gone from the view');
SELECT is((SELECT count(*) FROM runq.runs WHERE schedule = 'sc-m3' AND status = 'running'), 1::bigint,
          'its run goes on, and keeps the schedule''s name');
SELECT runq.create_schedule('sc-m3', 'sc-t', 'sc-k', cron => '0 0 1 1 *', priority => 2820);
CALL pg_temp.due('sc-m3', pg_temp.new_year());
CALL pg_temp.tick();
SELECT results_eq('SELECT schedule, outcome FROM ticked', $$VALUES ('sc-m3', 'skipped_overlap')$$,
                  'created again under that name, it finds the old live run: skipped_overlap');

-- ---------------------------------------------------------------------------
-- privileges
-- ---------------------------------------------------------------------------
SET ROLE runq_worker;
SELECT lives_ok('SELECT * FROM runq.tick()', 'runq_worker may tick');
SELECT throws_ok($$SELECT runq.create_schedule('sc-p', 'sc-t', 'sc-k', cron => '* * * * *')$$, '42501', NULL,
                 'runq_worker cannot create_schedule');
SELECT throws_ok($$SELECT runq.drop_schedule('sc-a')$$, '42501', NULL, 'runq_worker cannot drop_schedule');
SELECT throws_ok('SELECT * FROM runq.schedules', '42501', NULL, 'runq_worker cannot read runq.schedules');
SELECT throws_ok('SELECT * FROM runq.schedule_settings', '42501', NULL, 'runq_worker cannot read the table');
RESET ROLE;
SET ROLE runq_client;
SELECT throws_ok('SELECT * FROM runq.tick()', '42501', NULL, 'runq_client cannot tick');
SELECT throws_ok($$SELECT runq.create_schedule('sc-p', 'sc-t', 'sc-k', cron => '* * * * *')$$, '42501', NULL,
                 'runq_client cannot create_schedule');
SELECT throws_ok($$SELECT runq.drop_schedule('sc-a')$$, '42501', NULL, 'runq_client cannot drop_schedule');
SELECT throws_ok('SELECT * FROM runq.schedules', '42501', NULL, 'runq_client cannot read runq.schedules');
RESET ROLE;
SET ROLE runq_admin;
SELECT is(runq.create_schedule('sc-p', 'sc-t', 'sc-k', cron => '* * * * *', priority => 2830), true,
          'runq_admin may create_schedule');
SELECT lives_ok('SELECT * FROM runq.tick()', 'runq_admin may tick');
SELECT is((SELECT count(*) FROM runq.schedules WHERE name = 'sc-p'), 1::bigint, 'runq_admin may read runq.schedules');
SELECT is(runq.drop_schedule('sc-p'), true, 'runq_admin may drop_schedule');
RESET ROLE;
SELECT ok(NOT has_function_privilege('public', 'runq.tick(integer)', 'EXECUTE')
          AND NOT has_function_privilege('public', 'runq.drop_schedule(text)', 'EXECUTE')
          AND NOT has_function_privilege('public',
                'runq.create_schedule(text, text, text, text, interval, jsonb, integer, text, integer, text, interval, interval)',
                'EXECUTE'),
          'PUBLIC may call none of them');

-- ---------------------------------------------------------------------------
-- tick reads a handful of buffers, however many schedules exist
-- ---------------------------------------------------------------------------
-- Buffers (hit + read) one call of runq.tick touches.
\ir helpers/buffers.sql
CREATE FUNCTION pg_temp.tick_buffers() RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_temp.call_buffers('SELECT * FROM runq.tick()')
$$;
-- Nothing live left, then one schedule due against a few.
UPDATE runq.runs SET status = 'cancelled', finished_at = now(), lease = NULL, lease_expires_at = NULL,
       question = NULL
 WHERE schedule IS NOT NULL AND status IN ('queued', 'running', 'waiting_for_user');  -- fixture
SELECT runq.create_schedule('sc-b', 'sc-t', 'sc-k', cron => '0 0 1 1 *', priority => 2840);
CALL pg_temp.due('sc-b', pg_temp.new_year());
SELECT * FROM runq.tick();  -- warm plan caches
CALL pg_temp.due('sc-b', pg_temp.new_year());
UPDATE runq.runs SET status = 'cancelled', finished_at = now() WHERE schedule = 'sc-b' AND status = 'queued';
SELECT pg_temp.tick_buffers() AS few_one \gset
SELECT pg_temp.tick_buffers() AS few_none \gset
-- 100,000 schedules, none due, written straight into the table.
INSERT INTO runq.schedule_settings (name, tenant_id, kind, cron, cron_fields, timezone, payload, priority,
                                    max_attempts, recovery_policy, created_at, next_slot)
SELECT 'sc-bulk-' || g, 'sc-t', 'sc-k', '0 0 1 1 *', runq._cron_fields('cron', '0 0 1 1 *'), 'UTC', '{}',
       2841, 3, 'resume', now(),
       pg_temp.new_year(-1) + g * interval '1 second'
  FROM generate_series(1, 100000) AS g;
ANALYZE runq.schedule_settings;
CALL pg_temp.due('sc-b', pg_temp.new_year());
UPDATE runq.runs SET status = 'cancelled', finished_at = now() WHERE schedule = 'sc-b' AND status = 'queued';
SELECT * FROM runq.tick();  -- re-plan after ANALYZE
CALL pg_temp.due('sc-b', pg_temp.new_year());
UPDATE runq.runs SET status = 'cancelled', finished_at = now() WHERE schedule = 'sc-b' AND status = 'queued';
SELECT pg_temp.tick_buffers() AS many_one \gset
SELECT pg_temp.tick_buffers() AS many_none \gset
-- The +20 allows for deeper B-trees (schedule_settings_due_idx a level or
-- two deeper at 100,000 rows) and for the dead entries this transaction's
-- own moves of sc-b's slot left in the due range (each a heap visit; vacuum
-- removes them in a live database). A walk over the schedules would cost
-- hundreds. A tick that creates a run also inserts the run (into every index
-- of runs) and writes the schedule's row anew: into two deeper indexes, and
-- into a heap page found through the free space map, as the bulk load filled
-- the last ones; hence the wider +40 there.
SELECT cmp_ok(:many_none::bigint, '<=', :few_none::bigint + 20,
    'a tick with nothing due costs no more with 100,000 schedules');
SELECT cmp_ok(:many_none::bigint, '<', 30::bigint, 'a tick with nothing due touches a handful of buffers');
SELECT cmp_ok(:many_one::bigint, '<=', :few_one::bigint + 40,
    'a tick that creates one run costs no more with 100,000 schedules');
SELECT cmp_ok(:many_one::bigint, '<', 100::bigint, 'a tick that creates one run touches some tens of buffers');
-- The pick, as a generic plan (parameters like the function's), walks
-- schedule_settings_due_idx with the slot as its index condition.
PREPARE pick(timestamptz, integer) AS
    SELECT s.name FROM runq.schedule_settings AS s
     WHERE s.next_slot <= $1
       AND NOT EXISTS (SELECT FROM runq.pause_settings AS p WHERE p.scope = 'schedule' AND p.key = s.name)
     ORDER BY s.next_slot, s.name
     LIMIT $2 FOR UPDATE OF s SKIP LOCKED;
SET LOCAL plan_cache_mode = force_generic_plan;
CREATE FUNCTION pg_temp.pick_plan() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_line text;
    v_all  text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (COSTS OFF) EXECUTE pick(now(), 100)' LOOP
        v_all := v_all || v_line || E'\n';
    END LOOP;
    RETURN v_all;
END $$;
SELECT matches(pg_temp.pick_plan(), 'Index Scan using schedule_settings_due_idx',
    'the pick walks schedule_settings_due_idx');
SELECT matches(pg_temp.pick_plan(), 'Index Cond: \(next_slot <= \$1\)',
    'the slot is its index condition, so schedules not due end the walk');
RESET plan_cache_mode;

-- A tick walks the parsed cron only: a row with a cron must have it, and an
-- every schedule has none.
SELECT throws_ok($$INSERT INTO runq.schedule_settings (name, tenant_id, kind, cron, timezone, payload,
                       priority, max_attempts, recovery_policy, created_at, next_slot)
                   VALUES ('sc-unparsed', 't', 'k', '0 0 1 1 *', 'UTC', '{}', 10, 3, 'resume', now(), now())$$,
    '23514', NULL, 'a cron without its parsed form is refused (schedule_settings_cron_parsed)');
SELECT is((SELECT s.cron_fields FROM runq.schedule_settings AS s WHERE s.name = 'sc-b'),
          runq._cron_fields('cron', '0 0 1 1 *'), 'create_schedule keeps the cron parsed');
SELECT diag(format('buffers per tick, few vs 100,000 schedules: nothing due %s/%s, one run %s/%s',
    :few_none, :many_none, :few_one, :many_one));
SELECT * FROM finish();
ROLLBACK;
