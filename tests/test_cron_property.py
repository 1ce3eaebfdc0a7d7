"""runq._cron_next against two references, over generated cron expressions,
time zones and instants (docs/contract.md "Schedules").

The expressions are built from the grammar runq accepts: five fields, each
`*` or a list of values, ranges and `*`, each with an optional /step; month
and day names in random case; 7 for Sunday; the day fields restricted or
not, so that both the OR rule (both restricted) and the AND rule occur.
Hours 0 to 3 are drawn more often, since that is where clocks change.

The references:

- cronsim (PyPI), a maintained cron library (Healthchecks.io's). It reads
  Vixie cron's grammar as runq does, but not runq's daylight-saving rules
  (it fires a repeated `*/15` hour twice, say), so it is the reference only
  where no clock change lies between `after` and the answer: always in UTC
  and the fixed-offset zones, away from transitions in the others.
- An oracle written here from the contract's rules alone, by brute force: every
  local minute of every local day that matches, each local time read in the
  zone with zoneinfo (no occurrence: skipped; two: the first), the earliest
  that is after `after`. It is the reference everywhere, around transitions
  too; and where cronsim applies, the oracle must agree with it as well, so
  the oracle is itself checked.

Each example asks for three slots in a row (the next after `after`, then the
next after that one, exactly on a slot), so "strictly after" is exercised
as a tick does. An expression that can never fire (its own test, built
to be one) must raise 22023 from both _cron_next and _check_cron.
The counts of cases checked and agreed are printed, a summary line a test.

"""
from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import psycopg
import pytest
from cronsim import CronSim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

UTC = dt.timezone.utc

ZONES = ["UTC", "Asia/Kolkata", "Asia/Tokyo", "America/New_York", "Europe/London",
         "Australia/Lord_Howe", "America/Sao_Paulo", "Pacific/Chatham", "Europe/Dublin"]
# The years the instants are drawn from, and those whose transitions are
# listed (a margin either side, for slots found after the last instant).
YEARS = (2000, 2045)
SPAN = (dt.datetime(1998, 1, 1, tzinfo=UTC), dt.datetime(2050, 1, 1, tzinfo=UTC))
# The oracle's search, as long as runq's (41 years from the day before).
ORACLE_DAYS = 41 * 366

# field: (lowest, highest, names from value 0 or 1 up)
FIELDS = [(0, 59, None), (0, 23, None), (1, 31, None),
          (1, 12, ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                   "nov", "dec"]),
          (0, 7, ["sun", "mon", "tue", "wed", "thu", "fri", "sat"])]
DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


# -- time zones: their transitions, from zoneinfo -----------------------------

def transitions(zone: str) -> list[dt.datetime]:
    """The instants in SPAN at which the zone's UTC offset changes, to the
    second: a daily scan, then a bisection within the day."""
    tz = ZoneInfo(zone)

    def offset(t: dt.datetime) -> dt.timedelta | None:
        return t.astimezone(tz).utcoffset()

    found = []
    t = SPAN[0]
    while t < SPAN[1]:
        nxt = t + dt.timedelta(days=1)
        if offset(t) != offset(nxt):
            lo, hi = t, nxt
            while hi - lo > dt.timedelta(seconds=1):
                mid = lo + (hi - lo) / 2
                lo, hi = (mid, hi) if offset(mid) == offset(lo) else (lo, mid)
            found.append(hi.replace(microsecond=0))
        t = nxt
    return found


TRANSITIONS = {zone: transitions(zone) for zone in ZONES}


def transition_between(zone: str, start: dt.datetime, end: dt.datetime) -> bool:
    return any(start <= t <= end for t in TRANSITIONS[zone])


# -- expressions: text and meaning, built together ----------------------------

@dataclass(frozen=True)
class Expression:
    text: str
    sets: tuple[frozenset[int], ...]  # minutes, hours, days, months, days of week (Sunday 0)
    either: bool  # both day fields restricted: a day matches either
    # cronsim reads a range of one value with a step, `5-5/2`, as `5/2`
    # (5 to the end): Vixie cron and runq read it as 5 alone
    cronsim_reads_it: bool = True

    def day_matches(self, day: dt.date) -> bool:
        dom = day.day in self.sets[2]
        dow = day.isoweekday() % 7 in self.sets[4]
        if day.month not in self.sets[3]:
            return False
        return dom or dow if self.either else dom and dow

    def can_fire(self) -> bool:
        return self.either or any(d <= DAYS_IN_MONTH[m - 1]
                                  for m in self.sets[3] for d in self.sets[2])


@st.composite
def value_text(draw: st.DrawFn, field: int, value: int) -> str:
    names = FIELDS[field][2]
    first = FIELDS[field][0] if field == 3 else 0  # month names from 1, day names from 0
    if names and 0 <= value - first < len(names) and draw(st.booleans()):
        name = names[value - first]
        return "".join(c.upper() if draw(st.booleans()) else c for c in name)
    return str(value)


@st.composite
def element(draw: st.DrawFn, field: int) -> tuple[str, set[int], bool, bool]:
    """One list element: (text, values, whether it starts with *, whether
    cronsim reads it as runq does)."""
    lo, hi, _ = FIELDS[field]
    values = st.integers(lo, hi)
    if field == 1:
        values = st.one_of(st.integers(0, 3), values)
    kind = draw(st.sampled_from(["star", "value", "range"]))
    step = draw(st.one_of(st.none(), st.integers(1, hi)))
    if kind == "star":
        a, b, text = lo, hi, "*"
    elif kind == "value":
        a = draw(values)
        b = a if step is None else hi  # `5/15` is `5-<highest>/15`
        text = draw(value_text(field, a))
    else:
        a, b = sorted((draw(values), draw(values)))
        text = f"{draw(value_text(field, a))}-{draw(value_text(field, b))}"
    if step is not None:
        text += f"/{step}"
    got = set(range(a, b + 1, step or 1))
    if field == 4:
        got = {v % 7 for v in got}
    return text, got, kind == "star", not (kind == "range" and a == b and step is not None)


@st.composite
def field_text(draw: st.DrawFn, field: int) -> tuple[str, set[int], bool, bool]:
    if draw(st.integers(0, 2)) == 0:  # plain * often, the day fields above all
        lo, hi, _ = FIELDS[field]
        return ("*", {v % 7 for v in range(lo, hi + 1)} if field == 4 else set(range(lo, hi + 1)),
                True, True)
    parts = draw(st.lists(element(field), min_size=1, max_size=3))
    values: set[int] = set().union(*(p[1] for p in parts))
    return ",".join(p[0] for p in parts), values, parts[0][2], all(p[3] for p in parts)


@st.composite
def never_firing_days(draw: st.DrawFn) -> list[tuple[str, set[int], bool, bool]]:
    """Day fields no day matches (AND rule): days of month none of the
    months has, as 30 February or 31 April."""
    days = draw(st.sampled_from([[30], [31], [30, 31]]))
    short = [2] if 30 in days else [2, 4, 6, 9, 11]
    months = draw(st.lists(st.sampled_from(short), min_size=1, max_size=3, unique=True))
    dow = draw(st.sampled_from(["*", "*/2", "*/7"]))
    return [(",".join(map(str, days)), set(days), False, True),
            (",".join(map(str, months)), set(months), False, True),
            (dow, {v % 7 for v in range(0, 8, int(dow[2:]) if "/" in dow else 1)}, True, True)]


@st.composite
def expressions(draw: st.DrawFn, never_firing: bool = False) -> Expression:
    fields = [draw(field_text(i)) for i in range(5)]
    if never_firing:
        fields[2:] = draw(never_firing_days())
    sep = draw(st.sampled_from([" ", " ", "  ", "\t"]))
    return Expression(sep.join(f[0] for f in fields),
                      tuple(frozenset(f[1]) for f in fields),
                      not fields[2][2] and not fields[4][2],
                      all(f[3] for f in fields))


@st.composite
def instants(draw: st.DrawFn, zone: str) -> dt.datetime:
    near = TRANSITIONS[zone]
    if near and draw(st.integers(0, 2)) < 2:
        # within a day of a clock change (two times in three), on a minute
        t = draw(st.sampled_from(near)) + dt.timedelta(
            minutes=draw(st.one_of(st.integers(-180, 180), st.integers(-1440, 1440))))
    else:
        t = dt.datetime(YEARS[0], 1, 1, tzinfo=UTC) + dt.timedelta(
            minutes=draw(st.integers(0, (YEARS[1] - YEARS[0]) * 525_600)))
    return t + dt.timedelta(seconds=draw(st.sampled_from([0, 0, 1, 30, 59])),
                            microseconds=draw(st.sampled_from([0, 0, 1, 500_000, 999_999])))


# -- the oracle ---------------------------------------------------------------

def first_occurrence(local: dt.datetime, tz: ZoneInfo) -> dt.datetime | None:
    """The first instant whose local time in tz is `local`; None in a gap."""
    found = []
    for fold in (0, 1):
        at = local.replace(tzinfo=tz, fold=fold).astimezone(UTC)
        if at.astimezone(tz).replace(tzinfo=None) == local:
            found.append(at)
    return min(found) if found else None


def oracle(expr: Expression, zone: str, after: dt.datetime) -> dt.datetime | None:
    """The contract's rules by brute force: every local minute of every matching
    local day from the one before `after`'s, read in the zone."""
    tz = ZoneInfo(zone)
    start = after.astimezone(tz).date() - dt.timedelta(days=1)
    for i in range(ORACLE_DAYS):
        day = start + dt.timedelta(days=i)
        if not expr.day_matches(day):
            continue
        hits = []
        for minute_of_day in range(1440):
            hour, minute = divmod(minute_of_day, 60)
            if hour in expr.sets[1] and minute in expr.sets[0]:
                at = first_occurrence(dt.datetime.combine(day, dt.time(hour, minute)), tz)
                if at is not None and at > after:
                    hits.append(at)
        if hits:
            return min(hits)
    return None


def library(expr: Expression, zone: str, after: dt.datetime) -> dt.datetime:
    # In UTC: aware datetimes of different zones never compare equal when one
    # is in a repeated hour (PEP 495), whatever instants they stand for.
    return next(CronSim(expr.text, after.astimezone(ZoneInfo(zone)))).astimezone(UTC)


# -- the database -------------------------------------------------------------

def cron_next(conn: psycopg.Connection, expr: Expression, zone: str,
              after: dt.datetime) -> dt.datetime | None:
    row = conn.execute("SELECT runq._cron_next(%s, %s, %s)", (expr.text, zone, after)).fetchone()
    assert row is not None
    result: dt.datetime | None = row[0]
    return None if result is None else result.astimezone(UTC)


# -- the property ---------------------------------------------------------------

def test_cron_next_agrees_with_the_oracle_and_cronsim(conn: psycopg.Connection,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    counts: Counter[str] = Counter()

    @settings(max_examples=400, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data(), expr=expressions(), zone=st.sampled_from(ZONES))
    def check(data: st.DataObject, expr: Expression, zone: str) -> None:
        after = data.draw(instants(zone), label="after")
        if not expr.can_fire():  # 31 April, drawn by chance: the test below
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="that can fire"):
                cron_next(conn, expr, zone, after)
            return
        fixed = not TRANSITIONS[zone]
        for _ in range(3):
            got = cron_next(conn, expr, zone, after)
            want = oracle(expr, zone, after)
            counts["checked"] += 1
            if want is not None and transition_between(zone, after - dt.timedelta(days=1),
                                                       want + dt.timedelta(days=1)):
                counts["around a transition"] += 1
            assert got == want, f"{expr.text!r} in {zone} after {after.isoformat()}: " \
                                f"runq {got}, oracle {want}"
            counts["agreed with the oracle"] += 1
            if want is None:
                break
            if not expr.cronsim_reads_it:
                counts["not for cronsim (a-a/step)"] += 1
            elif fixed or not transition_between(zone, after - dt.timedelta(days=1),
                                                 want + dt.timedelta(days=1)):
                lib = library(expr, zone, after)
                counts["compared with cronsim"] += 1
                assert got == lib, f"{expr.text!r} in {zone} after {after.isoformat()}: " \
                                   f"runq {got}, cronsim {lib}"
                counts["agreed with cronsim"] += 1
            after = want

    try:
        check()
    finally:
        with capsys.disabled():
            print(f"\ncron property: {counts['checked']} cases checked, "
                  f"{counts['agreed with the oracle']} agreed with the oracle "
                  f"({counts['around a transition']} within a day of a clock change); "
                  f"{counts['compared with cronsim']} compared with cronsim, "
                  f"{counts['agreed with cronsim']} agreed "
                  f"({counts['not for cronsim (a-a/step)']} skipped: "
                  f"a range of one value with a step)")
    # Not vacuous: each kind of comparison happened, many times.
    assert counts["checked"] >= 500, counts
    assert counts["compared with cronsim"] >= 200, counts
    assert counts["around a transition"] >= 50, counts


def test_an_expression_that_can_never_fire_raises(conn: psycopg.Connection,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    counts: Counter[str] = Counter()

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(expr=expressions(never_firing=True), zone=st.sampled_from(ZONES))
    def check(expr: Expression, zone: str) -> None:
        assert not expr.can_fire()
        counts["never fires"] += 1
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="that can fire"):
            cron_next(conn, expr, zone, dt.datetime(2026, 1, 1, tzinfo=UTC))
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="that can fire"):
            conn.execute("SELECT runq._check_cron('cron', %s)", (expr.text,))
        counts["raised 22023"] += 1

    try:
        check()
    finally:
        with capsys.disabled():
            print(f"\ncron property: {counts['never fires']} expressions that can never fire, "
                  f"{counts['raised 22023']} raised 22023 from _cron_next and _check_cron")
    assert counts["raised 22023"] >= 30, counts


# -- the references bite ----------------------------------------------------------

def test_the_oracle_and_cronsim_differ_where_runq_has_its_own_rules() -> None:
    # A repeated hour: New York's clocks fall back at 2026-11-01 06:00 UTC,
    # from 01:59 EDT to 01:00 EST. runq fires 01:30 once, at its first
    # occurrence; cronsim, ticking in UTC for a `*/30` field, fires it twice.
    expr = Expression("*/30 1 * * *", (frozenset({0, 30}), frozenset({1}), frozenset(range(1, 32)),
                                       frozenset(range(1, 13)), frozenset(range(7))), False)
    after = dt.datetime(2026, 11, 1, 5, 45, tzinfo=UTC)  # 01:45 EDT, the first pass
    assert oracle(expr, "America/New_York", after) == dt.datetime(2026, 11, 2, 6, 0, tzinfo=UTC)
    assert library(expr, "America/New_York", after) == dt.datetime(2026, 11, 1, 6, 0, tzinfo=UTC)
    # And a gap: 2026-03-08 02:30 does not exist in New York.
    expr = Expression("30 2 * * *", (frozenset({30}), frozenset({2}), frozenset(range(1, 32)),
                                     frozenset(range(1, 13)), frozenset(range(7))), False)
    after = dt.datetime(2026, 3, 8, 5, 0, tzinfo=UTC)  # 00:00 EST
    assert oracle(expr, "America/New_York", after) == dt.datetime(2026, 3, 9, 6, 30, tzinfo=UTC)


def test_cron_next_one_known_slot(conn: psycopg.Connection) -> None:
    # The three agree on a plain weekday schedule, to the second.
    expr = Expression("0 9 * * mon-fri",
                      (frozenset({0}), frozenset({9}), frozenset(range(1, 32)),
                       frozenset(range(1, 13)), frozenset({1, 2, 3, 4, 5})), False)
    after = dt.datetime(2026, 5, 1, 12, 0, tzinfo=UTC)  # a Friday, 08:00 in New York
    got = cron_next(conn, expr, "America/New_York", after)
    assert got == oracle(expr, "America/New_York", after)
    assert got == library(expr, "America/New_York", after)
    assert got == dt.datetime(2026, 5, 1, 13, 0, tzinfo=UTC)
