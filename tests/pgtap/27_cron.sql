-- Cron expressions of schedules (v0.2, deploy/function__cron_next.sql):
-- runq._cron_next(cron, timezone, after), the first instant strictly after
-- `after` whose local time in the zone matches, and the argument checks
-- runq._check_cron and runq._check_timezone (through runq._cron_fields, the
-- parser). Every field's syntax: *, values, lists, ranges, steps (*/n, a-b/n,
-- and a/n as a-<highest>/n), month and day names in any case, 0 and 7 for
-- Sunday; Vixie cron's OR rule when both day fields are restricted, the AND
-- rule when either starts with *; 31st and 29 February; a slot 40 years on.
-- Time zones: a local time in a spring-forward gap is skipped (New York,
-- London, Lord Howe's half hour, Sao Paulo's midnight, Apia's lost day), one
-- that occurs twice fires once, at its first occurrence, never again when
-- `after` lies between the two. Every error: 22023 with its message. No runq
-- role may call these internal functions. Nothing here touches a table.
BEGIN;
SELECT plan(144);

SET LOCAL timezone = 'UTC';

-- ---------------------------------------------------------------------------
-- Structure
-- ---------------------------------------------------------------------------
SELECT function_returns('runq', '_cron_next', ARRAY['text', 'text', 'timestamp with time zone'],
                        'timestamp with time zone', '_cron_next(text, text, timestamptz) returns timestamptz');
SELECT function_returns('runq', '_check_cron', ARRAY['text', 'text'], 'boolean',
                        '_check_cron(text, text) returns boolean');
SELECT function_returns('runq', '_check_timezone', ARRAY['text', 'text'], 'boolean',
                        '_check_timezone(text, text) returns boolean');
SELECT volatility_is('runq', '_cron_next', ARRAY['text', 'text', 'timestamp with time zone'], 'stable',
                     '_cron_next is STABLE: it reads the time zone data');
SELECT volatility_is('runq', '_check_timezone', ARRAY['text', 'text'], 'stable',
                     '_check_timezone is STABLE');
SELECT volatility_is('runq', '_check_cron', ARRAY['text', 'text'], 'immutable',
                     '_check_cron is IMMUTABLE, as the other argument checks');
SELECT isnt_definer('runq', '_cron_next', ARRAY['text', 'text', 'timestamp with time zone'],
                    '_cron_next is SECURITY INVOKER');
SELECT is((SELECT count(*)::integer FROM unnest(ARRAY['runq_client', 'runq_worker', 'runq_admin', 'public']) AS r (r)
            CROSS JOIN unnest(ARRAY['runq._cron_next(text, text, timestamptz)', 'runq._check_cron(text, text)',
                                    'runq._check_timezone(text, text)', 'runq._cron_fields(text, text)']) AS f (f)
           WHERE has_function_privilege(r.r, f.f, 'EXECUTE')),
          0, 'no runq role (nor PUBLIC) may call the cron functions');

-- ---------------------------------------------------------------------------
-- Minutes and hours: *, values, lists, ranges, steps; strictly after
-- (UTC; 2026-01-01 is a Thursday)
-- ---------------------------------------------------------------------------
SELECT is(runq._cron_next('* * * * *', 'UTC', '2026-01-01 00:00+00'), '2026-01-01 00:01+00'::timestamptz,
          '* * * * *: after a slot exactly, the next minute (strictly after)');
SELECT is(runq._cron_next('* * * * *', 'UTC', '2026-01-01 00:00:30+00'), '2026-01-01 00:01+00'::timestamptz,
          '* * * * *: after a time within a minute, the next whole minute');
SELECT is(runq._cron_next('* * * * *', 'UTC', '2026-01-01 00:00:59.999999+00'), '2026-01-01 00:01+00'::timestamptz,
          '* * * * *: microseconds before a slot, that slot');
SELECT is(runq._cron_next('*/5 * * * *', 'UTC', '2026-01-01 00:02+00'), '2026-01-01 00:05+00'::timestamptz,
          '*/5: every fifth minute');
SELECT is(runq._cron_next('5 * * * *', 'UTC', '2026-01-01 00:05+00'), '2026-01-01 01:05+00'::timestamptz,
          'a minute value: after its slot, the next hour''s');
SELECT is(runq._cron_next('5,10,50 * * * *', 'UTC', '2026-01-01 00:10+00'), '2026-01-01 00:50+00'::timestamptz,
          'a list of minutes');
SELECT is(runq._cron_next('10-12 * * * *', 'UTC', '2026-01-01 00:12+00'), '2026-01-01 01:10+00'::timestamptz,
          'a range of minutes: after its end, its start in the next hour');
SELECT is(runq._cron_next('1-30/7 * * * *', 'UTC', '2026-01-01 00:22+00'), '2026-01-01 00:29+00'::timestamptz,
          'a range with a step: 1-30/7 is 1, 8, 15, 22, 29');
SELECT is(runq._cron_next('1-30/7 * * * *', 'UTC', '2026-01-01 00:29+00'), '2026-01-01 01:01+00'::timestamptz,
          'a range with a step: after 29, the next hour''s 1');
SELECT is(runq._cron_next('5/15 * * * *', 'UTC', '2026-01-01 00:35+00'), '2026-01-01 00:50+00'::timestamptz,
          'a value with a step: 5/15 is 5-59/15 (Vixie cron), so 50');
SELECT is(runq._cron_next('5/15 * * * *', 'UTC', '2026-01-01 00:50+00'), '2026-01-01 01:05+00'::timestamptz,
          'a value with a step: after 50, the next hour''s 5');
SELECT is(runq._cron_next('*/25 * * * *', 'UTC', '2026-01-01 00:50+00'), '2026-01-01 01:00+00'::timestamptz,
          '*/25 is 0, 25, 50: it does not carry over the hour');
SELECT is(runq._cron_next('0 */6 * * *', 'UTC', '2026-01-01 00:00+00'), '2026-01-01 06:00+00'::timestamptz,
          '*/6 hours');
SELECT is(runq._cron_next('30 9-17/4 * * *', 'UTC', '2026-01-01 09:30+00'), '2026-01-01 13:30+00'::timestamptz,
          'an hour range with a step: 9, 13, 17');
SELECT is(runq._cron_next('30 9-17/4 * * *', 'UTC', '2026-01-01 17:30+00'), '2026-01-02 09:30+00'::timestamptz,
          'after the day''s last hour, the next day''s first');
SELECT is(runq._cron_next('0,30 8,20 * * *', 'UTC', '2026-01-01 08:30+00'), '2026-01-01 20:00+00'::timestamptz,
          'lists in both minute and hour');
SELECT is(runq._cron_next(E'0\t12   * *  *', 'UTC', '2026-01-01 00:00+00'), '2026-01-01 12:00+00'::timestamptz,
          'fields are separated by any run of spaces and tabs');
SELECT is(runq._cron_next(' 0 12 * * * ', 'UTC', '2026-01-01 00:00+00'), '2026-01-01 12:00+00'::timestamptz,
          'spaces around the expression are ignored');

-- ---------------------------------------------------------------------------
-- Days of month, months and names
-- ---------------------------------------------------------------------------
SELECT is(runq._cron_next('0 0 15 * *', 'UTC', '2026-01-01 00:00+00'), '2026-01-15 00:00+00'::timestamptz,
          'a day of month');
SELECT is(runq._cron_next('0 0 31 * *', 'UTC', '2026-01-31 00:00+00'), '2026-03-31 00:00+00'::timestamptz,
          'the 31st: February (no 31st) is passed over');
SELECT is(runq._cron_next('0 0 1 3 *', 'UTC', '2026-01-01 00:00+00'), '2026-03-01 00:00+00'::timestamptz,
          'a month');
SELECT is(runq._cron_next('0 0 1 */5 *', 'UTC', '2026-01-01 00:00+00'), '2026-06-01 00:00+00'::timestamptz,
          '*/5 months: 1, 6, 11');
SELECT is(runq._cron_next('0 0 1 jul *', 'UTC', '2026-01-01 00:00+00'), '2026-07-01 00:00+00'::timestamptz,
          'a month name');
SELECT is(runq._cron_next('0 0 1 JuL *', 'UTC', '2026-01-01 00:00+00'), '2026-07-01 00:00+00'::timestamptz,
          'a month name in any case');
SELECT is(runq._cron_next('0 0 1 mar-MAY *', 'UTC', '2026-05-01 00:00+00'), '2027-03-01 00:00+00'::timestamptz,
          'a range of month names: after its last, next year''s first');
SELECT is(runq._cron_next('0 0 1 jan-dec/6 *', 'UTC', '2026-01-01 00:00+00'), '2026-07-01 00:00+00'::timestamptz,
          'a range of month names with a step');
SELECT is(runq._cron_next('0 0 1 feb,aug,11 *', 'UTC', '2026-03-01 00:00+00'), '2026-08-01 00:00+00'::timestamptz,
          'a list of names and numbers');
SELECT is(runq._cron_next('0 12 * * mon', 'UTC', '2026-01-01 00:00+00'), '2026-01-05 12:00+00'::timestamptz,
          'a day name');
SELECT is(runq._cron_next('0 12 * * MON-fri', 'UTC', '2026-01-02 12:00+00'), '2026-01-05 12:00+00'::timestamptz,
          'a range of day names in any case: after Friday, Monday');
SELECT is(runq._cron_next('0 12 * * 1-5', 'UTC', '2026-01-02 12:00+00'), '2026-01-05 12:00+00'::timestamptz,
          'the same range in numbers');
SELECT is(runq._cron_next('0 0 * * 7', 'UTC', '2026-01-01 00:00+00'), '2026-01-04 00:00+00'::timestamptz,
          '7 is Sunday');
SELECT is(runq._cron_next('0 0 * * 0', 'UTC', '2026-01-01 00:00+00'), '2026-01-04 00:00+00'::timestamptz,
          '0 is Sunday');
SELECT is(runq._cron_next('0 0 * * Sun', 'UTC', '2026-01-01 00:00+00'), '2026-01-04 00:00+00'::timestamptz,
          'sun is Sunday');
SELECT is(runq._cron_next('0 0 * * 5-7', 'UTC', '2026-01-02 00:00+00'), '2026-01-03 00:00+00'::timestamptz,
          'a range to 7: Friday to Sunday, so Saturday next');
SELECT is(runq._cron_next('0 0 * * 5-7', 'UTC', '2026-01-03 00:00+00'), '2026-01-04 00:00+00'::timestamptz,
          'a range to 7: its Sunday');
SELECT is(runq._cron_next('0 0 * * fri-7', 'UTC', '2026-01-03 00:00+00'), '2026-01-04 00:00+00'::timestamptz,
          'a range from a name to 7');
SELECT is(runq._cron_next('0 0 * * */2', 'UTC', '2026-01-01 00:00+00'), '2026-01-03 00:00+00'::timestamptz,
          '*/2 days of week: 0, 2, 4, 6 (not 7): after Thursday, Saturday');

-- ---------------------------------------------------------------------------
-- The day rules: OR when both day fields are restricted, AND otherwise
-- ---------------------------------------------------------------------------
SELECT is(runq._cron_next('0 0 13 * fri', 'UTC', '2026-01-01 00:00+00'), '2026-01-02 00:00+00'::timestamptz,
          'OR rule: both restricted, a Friday that is not the 13th matches');
SELECT is(runq._cron_next('0 0 13 * fri', 'UTC', '2026-01-09 00:00+00'), '2026-01-13 00:00+00'::timestamptz,
          'OR rule: the 13th that is not a Friday (a Tuesday) matches');
SELECT is(runq._cron_next('0 0 1,14,27 * fri', 'UTC', '2026-01-01 00:00+00'), '2026-01-02 00:00+00'::timestamptz,
          'OR rule with a list of days of month');
SELECT is(runq._cron_next('0 0 */13 * fri', 'UTC', '2026-01-01 00:00+00'), '2026-02-27 00:00+00'::timestamptz,
          'AND rule: a day of month field starting with * (1, 14, 27) must match too: the first Friday 27th');
SELECT is(runq._cron_next('0 0 13 * */7', 'UTC', '2026-01-01 00:00+00'), '2026-09-13 00:00+00'::timestamptz,
          'AND rule: a day of week field starting with * (*/7: Sunday) must match too: the first Sunday 13th');
SELECT is(runq._cron_next('0 0 13 * *', 'UTC', '2026-01-01 00:00+00'), '2026-01-13 00:00+00'::timestamptz,
          'AND rule with * for day of week: the day of month alone');
SELECT is(runq._cron_next('0 0 * * fri', 'UTC', '2026-01-01 00:00+00'), '2026-01-02 00:00+00'::timestamptz,
          'AND rule with * for day of month: the day of week alone');
SELECT is(runq._cron_next('0 0 31 4 mon', 'UTC', '2026-01-01 00:00+00'), '2026-04-06 00:00+00'::timestamptz,
          'OR rule: 31 April never comes, April''s Mondays do');

-- ---------------------------------------------------------------------------
-- 29 February
-- ---------------------------------------------------------------------------
SELECT is(runq._cron_next('0 0 29 2 *', 'UTC', '2026-01-01 00:00+00'), '2028-02-29 00:00+00'::timestamptz,
          '29 February: the next leap year');
SELECT is(runq._cron_next('0 0 29 2 *', 'UTC', '2028-02-29 00:00+00'), '2032-02-29 00:00+00'::timestamptz,
          '29 February: after one, four years on');
SELECT is(runq._cron_next('0 0 29 2 *', 'UTC', '2096-02-29 00:00+00'), '2104-02-29 00:00+00'::timestamptz,
          '29 February: 2100 is not a leap year, so eight years on');
SELECT is(runq._cron_next('0 0 29 2 */7', 'UTC', '2026-01-01 00:00+00'), '2032-02-29 00:00+00'::timestamptz,
          '29 February that is a Sunday (AND rule)');
SELECT is(runq._cron_next('0 0 29 2 */7', 'UTC', '2088-02-29 00:00+00'), '2128-02-29 00:00+00'::timestamptz,
          '29 February that is a Sunday: 40 years on, the longest wait, within the search');

-- ---------------------------------------------------------------------------
-- Time zones: fixed offsets, spring-forward gaps, repeated local times
-- ---------------------------------------------------------------------------
SELECT is(runq._cron_next('0 9 * * *', 'Asia/Kolkata', '2026-01-01 03:30+00'), '2026-01-02 09:00+05:30'::timestamptz,
          'Asia/Kolkata: 09:00 local is 03:30 UTC; after it, the next day''s');
SELECT is(runq._cron_next('0 9 * * *', 'America/New_York', '2026-07-01 00:00+00'), '2026-07-01 09:00-04'::timestamptz,
          'New York in summer: 09:00 EDT');
SELECT is(runq._cron_next('0 9 * * *', 'America/New_York', '2026-12-01 00:00+00'), '2026-12-01 09:00-05'::timestamptz,
          'New York in winter: 09:00 EST');
-- New York springs forward on 2026-03-08: 02:00 EST becomes 03:00 EDT.
SELECT is(runq._cron_next('30 2 * * *', 'America/New_York', '2026-03-08 00:00-05'), '2026-03-09 02:30-04'::timestamptz,
          'New York gap: 2026-03-08 02:30 does not exist, the next day''s 02:30 fires');
SELECT is(runq._cron_next('*/30 * * * *', 'America/New_York', '2026-03-08 01:30-05'), '2026-03-08 03:00-04'::timestamptz,
          'New York gap: 02:00 and 02:30 are skipped, 03:00 EDT follows 01:30 EST');
SELECT is(runq._cron_next('59 1 * * *', 'America/New_York', '2026-03-08 00:00-05'), '2026-03-08 01:59-05'::timestamptz,
          'New York gap: 01:59, just before it, fires');
SELECT is(runq._cron_next('0 3 * * *', 'America/New_York', '2026-03-08 01:59-05'), '2026-03-08 03:00-04'::timestamptz,
          'New York gap: 03:00, just after it, fires, one minute after 01:59');
-- New York falls back on 2026-11-01: 02:00 EDT becomes 01:00 EST, 01:xx twice.
SELECT is(runq._cron_next('30 1 * * *', 'America/New_York', '2026-11-01 00:00-04'), '2026-11-01 01:30-04'::timestamptz,
          'New York repeated hour: 01:30 fires at its first occurrence (EDT)');
SELECT is(runq._cron_next('30 1 * * *', 'America/New_York', '2026-11-01 01:30-04'), '2026-11-02 01:30-05'::timestamptz,
          'New York repeated hour: after its first occurrence, not at its second: the next day''s');
SELECT is(runq._cron_next('30 1 * * *', 'America/New_York', '2026-11-01 01:10-05'), '2026-11-02 01:30-05'::timestamptz,
          'New York repeated hour: after lies between the two occurrences: not returned again');
SELECT is(runq._cron_next('*/20 1 * * *', 'America/New_York', '2026-11-01 01:40-04'), '2026-11-02 01:00-05'::timestamptz,
          'New York repeated hour: 01:00, 01:20, 01:40 fire once each, in the first pass only');
SELECT is(runq._cron_next('0 2 * * *', 'America/New_York', '2026-11-01 01:40-04'), '2026-11-01 02:00-05'::timestamptz,
          'New York repeated hour: 02:00 EST, after both passes, fires');
SELECT is(runq._cron_next('0,59 * * * *', 'America/New_York', '2026-11-01 01:59-04'), '2026-11-01 02:00-05'::timestamptz,
          'New York repeated hour: after 01:59 EDT, 01:00 EST is a second occurrence: 02:00 EST is next');
SELECT is(runq._cron_next('0 0 * * *', 'America/New_York', '2026-11-01 00:00-04'), '2026-11-02 00:00-05'::timestamptz,
          'New York: the day of the change is 25 hours long, midnight to midnight');
-- London: 2026-03-29 01:00 GMT becomes 02:00 BST; 2026-10-25 02:00 BST becomes 01:00 GMT.
SELECT is(runq._cron_next('30 1 * * *', 'Europe/London', '2026-03-29 00:00+00'), '2026-03-30 01:30+01'::timestamptz,
          'London gap: 2026-03-29 01:30 does not exist');
SELECT is(runq._cron_next('30 1 * * *', 'Europe/London', '2026-10-25 00:00+01'), '2026-10-25 01:30+01'::timestamptz,
          'London repeated hour: 01:30 BST, the first occurrence');
SELECT is(runq._cron_next('30 1 * * *', 'Europe/London', '2026-10-25 01:30+01'), '2026-10-26 01:30+00'::timestamptz,
          'London repeated hour: not 01:30 GMT the same day');
SELECT is(runq._cron_next('0 1 * * *', 'Europe/London', '2026-10-25 01:00+00'), '2026-10-26 01:00+00'::timestamptz,
          'London repeated hour: after lies exactly on the second 01:00: next day');
-- Lord Howe moves half an hour: 2026-10-04 02:00 +10:30 becomes 02:30 +11,
-- and 2026-04-05 02:00 +11 becomes 01:30 +10:30.
SELECT is(runq._cron_next('15 2 * * *', 'Australia/Lord_Howe', '2026-10-04 00:00+10:30'),
          '2026-10-05 02:15+11'::timestamptz, 'Lord Howe half-hour gap: 02:15 does not exist that day');
SELECT is(runq._cron_next('*/15 2 * * *', 'Australia/Lord_Howe', '2026-10-04 01:00+10:30'),
          '2026-10-04 02:30+11'::timestamptz, 'Lord Howe half-hour gap: 02:00 and 02:15 skipped, 02:30 fires');
SELECT is(runq._cron_next('45 1 * * *', 'Australia/Lord_Howe', '2026-04-05 00:00+11'),
          '2026-04-05 01:45+11'::timestamptz, 'Lord Howe repeated half hour: 01:45 at its first occurrence');
SELECT is(runq._cron_next('45 1 * * *', 'Australia/Lord_Howe', '2026-04-05 01:35+10:30'),
          '2026-04-06 01:45+10:30'::timestamptz, 'Lord Howe repeated half hour: between the two, not again');
SELECT is(runq._cron_next('15 1 * * *', 'Australia/Lord_Howe', '2026-04-05 01:45+11'),
          '2026-04-06 01:15+10:30'::timestamptz, 'Lord Howe: 01:15 occurs once that day, before the change');
SELECT is(runq._cron_next('0 0 * * *', 'America/Sao_Paulo', '2018-11-03 12:00-03'), '2018-11-05 00:00-02'::timestamptz,
          'Sao Paulo 2018: midnight of 4 November did not exist (00:00 became 01:00)');
SELECT is(runq._cron_next('0 12 * * *', 'Pacific/Apia', '2011-12-29 12:00-10'), '2011-12-31 12:00+14'::timestamptz,
          'Apia skipped 30 December 2011 whole');
SELECT is(runq._cron_next('0 0 30 12 *', 'Pacific/Apia', '2011-12-01 00:00-10'), '2012-12-30 00:00+14'::timestamptz,
          'Apia: 30 December 2011 never came, the next is a year on');
SELECT is(runq._cron_next('30 2 * * *', 'america/new_york', '2026-03-08 00:00-05'), '2026-03-09 02:30-04'::timestamptz,
          'a time zone name in any case');

-- ---------------------------------------------------------------------------
-- NULL and infinite instants
-- ---------------------------------------------------------------------------
SELECT is(runq._cron_next('* * * * *', 'UTC', NULL), NULL, 'after NULL: NULL');
SELECT is(runq._cron_next('* * * * *', 'UTC', 'infinity'), NULL, 'after infinity: NULL');
SELECT is(runq._cron_next('* * * * *', 'UTC', '-infinity'), NULL, 'after -infinity: NULL');

-- ---------------------------------------------------------------------------
-- _check_cron: true for good expressions
-- ---------------------------------------------------------------------------
SELECT is(runq._check_cron('cron', '*/5 * * * *'), true, 'check: */5 * * * * is good');
SELECT is(runq._check_cron('cron', '0-59/59 0-23 1-31/30 jan-dec SUN-sat'), true, 'check: every syntax at once is good');
SELECT is(runq._check_cron('cron', '0 0 29 2 *'), true, 'check: 29 February is good (leap years)');
SELECT is(runq._check_cron('cron', '0 0 31 4 mon'), true, 'check: 31 April or Mondays is good (OR rule)');
SELECT is(runq._check_cron('cron', '0 0 30 2,3 *'), true, 'check: the 30th of February or March is good');
SELECT is(runq._check_cron('cron', '5/15 */23 7/1 12/12 7/7'), true, 'check: steps up to each field''s largest value');

-- ---------------------------------------------------------------------------
-- Errors: 22023 "<argument> must be <rule>, got <value>"
-- ---------------------------------------------------------------------------
SELECT throws_ok($$SELECT runq._check_cron('cron', NULL)$$, '22023',
                 'cron must be five fields: minute, hour, day of month, month and day of week, got NULL',
                 'check: NULL raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '')$$, '22023',
                 $m$cron must be five fields: minute, hour, day of month, month and day of week, got ''$m$,
                 'check: an empty expression raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '* * * *')$$, '22023',
                 $m$cron must be five fields: minute, hour, day of month, month and day of week, got '* * * *'$m$,
                 'check: four fields raise');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 * * * * *')$$, '22023',
                 $m$cron must be five fields: minute, hour, day of month, month and day of week, got '0 * * * * *'$m$,
                 'check: six fields (seconds) raise');
SELECT throws_ok($$SELECT runq._check_cron('cron', '@daily')$$, '22023',
                 $m$cron must be five fields: minute, hour, day of month, month and day of week, got '@daily'$m$,
                 'check: a macro raises');
SELECT throws_ok($$SELECT runq._check_cron('schedule', '* * *')$$, '22023',
                 $m$schedule must be five fields: minute, hour, day of month, month and day of week, got '* * *'$m$,
                 'check: the message names the argument it is given');
SELECT throws_ok($$SELECT runq._check_cron('cron', '60 * * * *')$$, '22023',
                 $m$cron must be a cron expression with minutes from 0 to 59, got '60 * * * *' (minute '60')$m$,
                 'check: minute 60 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 24 * * *')$$, '22023',
                 $m$cron must be a cron expression with hours from 0 to 23, got '0 24 * * *' (hour '24')$m$,
                 'check: hour 24 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 0 * *')$$, '22023',
                 $m$cron must be a cron expression with days of month from 1 to 31, got '0 0 0 * *' (day of month '0')$m$,
                 'check: day of month 0 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 1-32 * *')$$, '22023',
                 $m$cron must be a cron expression with days of month from 1 to 31, got '0 0 1-32 * *' (day of month '1-32')$m$,
                 'check: a range to day 32 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 1 13 *')$$, '22023',
                 $m$cron must be a cron expression with months from 1 to 12 or jan to dec, got '0 0 1 13 *' (month '13')$m$,
                 'check: month 13 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 1 0 *')$$, '22023',
                 $m$cron must be a cron expression with months from 1 to 12 or jan to dec, got '0 0 1 0 *' (month '0')$m$,
                 'check: month 0 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 * * 8')$$, '22023',
                 $m$cron must be a cron expression with days of week from 0 to 7 or sun to sat, got '0 0 * * 8' (day of week '8')$m$,
                 'check: day of week 8 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 1 foo *')$$, '22023',
                 $m$cron must be a cron expression with months from 1 to 12 or jan to dec, got '0 0 1 foo *' (month 'foo')$m$,
                 'check: an unknown month name raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 1 mon *')$$, '22023',
                 $m$cron must be a cron expression with months from 1 to 12 or jan to dec, got '0 0 1 mon *' (month 'mon')$m$,
                 'check: a day name as a month raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 * * jan')$$, '22023',
                 $m$cron must be a cron expression with days of week from 0 to 7 or sun to sat, got '0 0 * * jan' (day of week 'jan')$m$,
                 'check: a month name as a day of week raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 * * monday')$$, '22023',
                 $m$cron must be a cron expression with days of week from 0 to 7 or sun to sat, got '0 0 * * monday' (day of week 'monday')$m$,
                 'check: a full day name raises (three letters only)');
SELECT throws_ok($$SELECT runq._check_cron('cron', 'jan * * * *')$$, '22023',
                 $m$cron must be a cron expression with minutes from 0 to 59, got 'jan * * * *' (minute 'jan')$m$,
                 'check: a name in a field without names raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 L * *')$$, '22023',
                 $m$cron must be a cron expression with days of month from 1 to 31, got '0 0 L * *' (day of month 'L')$m$,
                 'check: L (not Vixie cron) raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '1-2-3 * * * *')$$, '22023',
                 $m$cron must be a cron expression whose fields are lists of *, values and ranges, each with an optional /step, got '1-2-3 * * * *' (minute '1-2-3')$m$,
                 'check: a range of three raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '1,,2 * * * *')$$, '22023',
                 $m$cron must be a cron expression whose fields are lists of *, values and ranges, each with an optional /step, got '1,,2 * * * *' (minute '')$m$,
                 'check: an empty list element raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '*/ * * * *')$$, '22023',
                 $m$cron must be a cron expression whose fields are lists of *, values and ranges, each with an optional /step, got '*/ * * * *' (minute '*/')$m$,
                 'check: a step without a number raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 ? * *')$$, '22023',
                 $m$cron must be a cron expression whose fields are lists of *, values and ranges, each with an optional /step, got '0 0 ? * *' (day of month '?')$m$,
                 'check: ? (Quartz) raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '*/0 * * * *')$$, '22023',
                 $m$cron must be a cron expression whose minute steps are from 1 to 59, got '*/0 * * * *' (minute '*/0')$m$,
                 'check: step 0 raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 */24 * * *')$$, '22023',
                 $m$cron must be a cron expression whose hour steps are from 1 to 23, got '0 */24 * * *' (hour '*/24')$m$,
                 'check: a step over the field''s largest value raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '5-1 * * * *')$$, '22023',
                 $m$cron must be a cron expression whose ranges run from low to high, got '5-1 * * * *' (minute '5-1')$m$,
                 'check: a reversed range raises');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 * * fri-mon')$$, '22023',
                 $m$cron must be a cron expression whose ranges run from low to high, got '0 0 * * fri-mon' (day of week 'fri-mon')$m$,
                 'check: a reversed range of day names raises (no wrapping)');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 30 2 *')$$, '22023',
                 $m$cron must be a cron expression that can fire, got '0 0 30 2 *' (none of its months has one of its days of month)$m$,
                 'check: 30 February can never fire');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 31 4 *')$$, '22023',
                 $m$cron must be a cron expression that can fire, got '0 0 31 4 *' (none of its months has one of its days of month)$m$,
                 'check: 31 April can never fire');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 31 2,4,6,9,11 *')$$, '22023',
                 $m$cron must be a cron expression that can fire, got '0 0 31 2,4,6,9,11 *' (none of its months has one of its days of month)$m$,
                 'check: the 31st of the short months can never fire');
SELECT throws_ok($$SELECT runq._check_cron('cron', '0 0 30 2 */7')$$, '22023',
                 $m$cron must be a cron expression that can fire, got '0 0 30 2 */7' (none of its months has one of its days of month)$m$,
                 'check: 30 February that is a Sunday (AND rule) can never fire');
SELECT throws_ok(format('SELECT runq._check_cron(%L, %L)', 'cron', repeat('1', 300)), '22023',
                 format('cron must be five fields: minute, hour, day of month, month and day of week, got %s',
                        quote_literal(repeat('1', 100))),
                 'check: a long value is shown by its first 100 characters');

-- _cron_next raises as the check does, and for a bad time zone.
SELECT throws_ok($$SELECT runq._cron_next('0 0 30 2 *', 'UTC', now())$$, '22023',
                 $m$cron must be a cron expression that can fire, got '0 0 30 2 *' (none of its months has one of its days of month)$m$,
                 '_cron_next: an expression that can never fire raises');
SELECT throws_ok($$SELECT runq._cron_next('61 * * * *', 'UTC', now())$$, '22023',
                 $m$cron must be a cron expression with minutes from 0 to 59, got '61 * * * *' (minute '61')$m$,
                 '_cron_next: a bad expression raises');
SELECT throws_ok($$SELECT runq._cron_next(NULL, 'UTC', now())$$, '22023',
                 'cron must be five fields: minute, hour, day of month, month and day of week, got NULL',
                 '_cron_next: a NULL expression raises');
SELECT throws_ok($$SELECT runq._cron_next('* * * * *', NULL, now())$$, '22023',
                 'timezone must be a time zone name such as UTC or Europe/Paris, got NULL',
                 '_cron_next: a NULL time zone raises');
SELECT throws_ok($$SELECT runq._cron_next('* * * * *', 'Nowhere/Atlantis', now())$$, '22023',
                 'time zone "Nowhere/Atlantis" not recognized',
                 '_cron_next: an unknown time zone raises (PostgreSQL''s own 22023)');

-- ---------------------------------------------------------------------------
-- _check_timezone
-- ---------------------------------------------------------------------------
SELECT is(runq._check_timezone('timezone', 'UTC'), true, 'timezone: UTC is good');
SELECT is(runq._check_timezone('timezone', 'America/New_York'), true, 'timezone: America/New_York is good');
SELECT is(runq._check_timezone('timezone', 'australia/lord_howe'), true, 'timezone: a name in any case is good');
SELECT throws_ok($$SELECT runq._check_timezone('timezone', 'Nowhere/Atlantis')$$, '22023',
                 $m$timezone must be a time zone name such as UTC or Europe/Paris, got 'Nowhere/Atlantis'$m$,
                 'timezone: an unknown name raises');
SELECT throws_ok($$SELECT runq._check_timezone('timezone', NULL)$$, '22023',
                 'timezone must be a time zone name such as UTC or Europe/Paris, got NULL',
                 'timezone: NULL raises');
SELECT throws_ok($$SELECT runq._check_timezone('timezone', '')$$, '22023',
                 $m$timezone must be a time zone name such as UTC or Europe/Paris, got ''$m$,
                 'timezone: empty raises');
SELECT throws_ok($$SELECT runq._check_timezone('timezone', 'XYZ-3')$$, '22023',
                 $m$timezone must be a time zone name such as UTC or Europe/Paris, got 'XYZ-3'$m$,
                 'timezone: a POSIX rule (which PostgreSQL would read, sign reversed) raises');
SELECT throws_ok($$SELECT runq._check_timezone('timezone', 'localtime')$$, '22023',
                 $m$timezone must be a time zone name such as UTC or Europe/Paris, got 'localtime'$m$,
                 'timezone: localtime (the server machine''s own setting, no zone name) raises');
SELECT throws_ok($$SELECT runq._check_timezone('timezone', 'Factory')$$, '22023',
                 $m$timezone must be a time zone name such as UTC or Europe/Paris, got 'Factory'$m$,
                 'timezone: Factory raises');
SELECT throws_ok($$SELECT runq._check_timezone('tz', 'CEST')$$, '22023',
                 $m$tz must be a time zone name such as UTC or Europe/Paris, got 'CEST'$m$,
                 'timezone: an abbreviation raises, naming the argument it is given');

-- The walk's next minute or hour: the lowest bit set at or above a bit.
SELECT is(ARRAY[runq._next_bit(1, 0), runq._next_bit(6, 1), runq._next_bit(5, 1),
                runq._next_bit(1::bigint << 59, 3), runq._next_bit((1::bigint << 60) - 1, 59)],
          ARRAY[0, 1, 2, 59, 59], '_next_bit: the lowest bit set at or above from');
SELECT is(ARRAY[runq._next_bit(0, 0), runq._next_bit(1, 1), runq._next_bit((1::bigint << 60) - 1, 60)],
          ARRAY[NULL, NULL, NULL]::integer[], '_next_bit: NULL when no bit is set there');
SELECT is(runq._cron_walk(runq._cron_fields('cron', '59 23 * * *'), 'UTC', '2026-12-31 23:59:00+00'),
          '2027-01-01 23:59:00+00'::timestamptz, '_cron_walk: the last minute of the day, from itself');
SELECT * FROM finish();
ROLLBACK;
