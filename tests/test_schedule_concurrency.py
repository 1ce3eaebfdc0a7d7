"""Eight processes tick the same schedules: each slot is handled once, and a
schedule never has two live runs.

1,000 schedules fire every second. Eight ticker processes call runq.tick(100)
in a loop for 14 s, all pausing together between 6 s and 9 s so that slots
are missed. Meanwhile, in this process, a consumer claims the runs and, after
holding each for up to 1.5 s, completes most and fails some (so that some
slots find their schedule's previous run still live), a redriver puts failed
runs back (racing the tickers for the schedule's one live run: RQ002 when it
loses), and a sampler counts the live runs per schedule in one snapshot after
another.

Then, across all eight processes' rows:
- no (schedule, slot) appears twice, and each schedule's slots run on from
  its first slot one second apart, every slot created, skipped or inside a
  missed row's span: over 10,000 slots in all;
- each created row's run is a run of that schedule with that slot in its
  payload, and every run of a schedule is such a row's;
- a skipped_overlap row names a run of its schedule;
- no sample ever saw two live runs of one schedule.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg

SCHEDULES = 1000
TICKERS = 8
SECONDS = 14.0
QUIET = (6.0, 9.0)  # every ticker rests in this window: slots are missed
LIVE = "('queued', 'running', 'waiting_for_user')"

TICKER = """
import json, sys, time
import psycopg
url, seconds, quiet_from, quiet_to, start = sys.argv[1], *map(float, sys.argv[2:6])
rows = []
with psycopg.connect(url, autocommit=True) as conn:
    while (now := time.time() - start) < seconds:
        if quiet_from <= now < quiet_to:
            time.sleep(0.05)
            continue
        batch = conn.execute("SELECT schedule, slot, run_id, outcome FROM runq.tick(100)").fetchall()
        rows += [(s, t.isoformat(), r, o) for s, t, r, o in batch]
        if len({s for s, _, _, _ in batch}) < 100:
            time.sleep(0.02)
print(json.dumps(rows))
"""


def test_eight_tickers_handle_each_slot_once_and_never_overlap(
        db_url: str, connect: Callable[[], psycopg.Connection[Any]]) -> None:
    conn = connect()
    conn.execute("""SELECT runq.create_schedule('s' || g, 't', 'tick.test', every => interval '1 second')
                      FROM generate_series(1, %s) AS g""", [SCHEDULES])
    created_at = dict(conn.execute("SELECT name, created_at FROM runq.schedule_settings").fetchall())
    assert len(created_at) == SCHEDULES

    start = time.time()
    tickers = [subprocess.Popen([sys.executable, "-c", TICKER, db_url, str(SECONDS),
                                 str(QUIET[0]), str(QUIET[1]), str(start)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(TICKERS)]
    stop = threading.Event()
    errors: list[BaseException] = []
    redrives = {"redriven": 0, "busy": 0}
    overlaps: list[tuple[str, int]] = []
    samples = [0]

    def guarded(loop: Callable[[psycopg.Connection[Any]], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                with psycopg.connect(db_url, autocommit=True) as c:
                    while not stop.is_set():
                        loop(c)
            except BaseException as error:  # surfaced below
                errors.append(error)
        return run

    held: list[tuple[float, int, int]] = []
    rng = random.Random(18)

    def consume(c: psycopg.Connection[Any]) -> None:
        for run_id, epoch in c.execute(
                "SELECT run_id, epoch FROM runq.claim(ARRAY[10], 'consumer',"
                " interval '1 minute', 200)").fetchall():
            held.append((time.monotonic() + rng.uniform(0, 1.5), run_id, epoch))
        now = time.monotonic()
        for due, run_id, epoch in [h for h in held if h[0] <= now]:
            held.remove((due, run_id, epoch))
            if rng.random() < 0.2:
                assert c.execute("SELECT runq.fail(%s, %s, '{\"code\": \"x\"}')",
                                 [run_id, epoch]).fetchone() == (True,)
            else:
                assert c.execute("SELECT runq.complete(%s, %s, '{}')",
                                 [run_id, epoch]).fetchone() == (True,)
        time.sleep(0.01)

    def redrive(c: psycopg.Connection[Any]) -> None:
        failed = [r for (r,) in c.execute(
            "SELECT run_id FROM runq.runs WHERE status = 'failed' ORDER BY random() LIMIT 20")]
        for run_id in failed:
            try:
                c.execute("SELECT runq.redrive(%s)", [run_id])
                redrives["redriven"] += 1
            except psycopg.Error as error:
                assert error.sqlstate == "RQ002", error
                assert "already has active run" in str(error), error
                redrives["busy"] += 1
        time.sleep(0.05)

    def sample(c: psycopg.Connection[Any]) -> None:
        overlaps.extend(c.execute(
            f"SELECT schedule, count(*)::int FROM runq.runs WHERE status IN {LIVE}"
            " AND schedule IS NOT NULL GROUP BY schedule HAVING count(*) > 1").fetchall())
        samples[0] += 1
        time.sleep(0.02)

    threads = [threading.Thread(target=guarded(f)) for f in (consume, redrive, sample)]
    for t in threads:
        t.start()
    outputs = [t.communicate(timeout=SECONDS + 60) for t in tickers]
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    for ticker, (_, err) in zip(tickers, outputs, strict=True):
        assert ticker.returncode == 0, err

    rows = [(s, datetime.fromisoformat(t), r, o) for out, _ in outputs for s, t, r, o in json.loads(out)]
    outcomes = {o for _, _, _, o in rows}
    assert outcomes == {"created", "skipped_overlap", "missed"}, outcomes
    assert redrives["redriven"] > 0 and redrives["busy"] > 0, redrives
    assert samples[0] > 100 and overlaps == [], (samples, overlaps[:10])

    # No slot twice, and every slot accounted for.
    keys = [(s, t) for s, t, _, _ in rows]
    assert len(keys) == len(set(keys)), "a slot was handled twice"
    second = timedelta(seconds=1)
    by_schedule: dict[str, list[tuple[datetime, int | None, str]]] = defaultdict(list)
    for s, t, r, o in rows:
        by_schedule[s].append((t, r, o))
    slots = 0
    next_slots = dict(conn.execute("SELECT name, next_slot FROM runq.schedule_settings").fetchall())
    for name, handled in by_schedule.items():
        handled.sort()
        expected = created_at[name] + second
        missed_from = None
        for t, _, o in handled:
            if o == "missed":
                assert t == expected and missed_from is None, (name, handled)
                missed_from = t
                continue
            if missed_from is None:
                assert t == expected, (name, t, expected)
            else:
                assert t > missed_from, (name, handled)
            slots += round((t - expected) / second) + 1
            expected, missed_from = t + second, None
        assert missed_from is None, (name, "a missed row with no slot run after it")
        assert next_slots[name] >= expected, (name, next_slots[name], expected)
    assert slots >= 10_000, slots

    # The created rows are the schedules' runs, one each, slot in the payload.
    runs = {r: (s, p) for r, s, p in conn.execute(
        "SELECT run_id, schedule, payload ->> 'slot' FROM runq.runs").fetchall()}
    created = [(s, t, r) for s, t, r, o in rows if o == "created"]
    assert sorted(r for _, _, r in created) == sorted(runs), "runs and created rows differ"
    for s, t, r in created:
        schedule, slot = runs[r]
        assert schedule == s and datetime.fromisoformat(slot.replace("Z", "+00:00")) == t, \
            (r, runs[r], t)
    for s, _, r, o in rows:
        if o == "skipped_overlap":
            assert r is not None and runs[r][0] == s, (s, r)


def test_ticks_and_submits_under_limits_do_not_deadlock(
        connect: Callable[[], psycopg.Connection[Any]]) -> None:
    # Under tenant and kind limits each run's admission locks its tenant and
    # its kind until commit. 400 due schedules over 5 tenants and 3 kinds,
    # sorted by name in an order that mixes them, ticked 50 at a time by four
    # connections at once while two others submit runs of every tenant and
    # kind: without the tick's up-front locking in one order this deadlocked
    # (40P01) on the first try.
    conn = connect()
    conn.execute("SELECT runq.set_limit('tenant', NULL, 100000), runq.set_limit('kind', NULL, 100000)")
    conn.execute("""SELECT runq.create_schedule('dl' || lpad(g::text, 3, '0'), 'ten' || (g * 7 % 5),
                                                'kind' || (g * 11 % 3), every => interval '1 hour')
                      FROM generate_series(1, 400) AS g""")
    conn.execute("UPDATE runq.schedule_settings"
                 " SET created_at = created_at - interval '1 hour', next_slot = created_at")
    errors: list[BaseException] = []
    rows: list[tuple[str, str]] = []
    start = threading.Barrier(6)
    done = threading.Event()

    def ticker() -> None:
        try:
            with psycopg.connect(conn.info.dsn, autocommit=True) as c:
                start.wait()
                while batch := c.execute("SELECT schedule, outcome FROM runq.tick(50)").fetchall():
                    rows.extend(batch)
        except BaseException as error:
            errors.append(error)

    def submitter(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with psycopg.connect(conn.info.dsn, autocommit=True) as c:
                start.wait()
                while not done.is_set():  # one run a transaction: one tenant, then one kind
                    c.execute("SELECT runq.submit(%s, %s)",
                              [f"ten{rng.randrange(5)}", f"kind{rng.randrange(3)}"])
        except BaseException as error:
            errors.append(error)

    tickers = [threading.Thread(target=ticker) for _ in range(4)]
    submitters = [threading.Thread(target=submitter, args=(i,)) for i in range(2)]
    for t in tickers + submitters:
        t.start()
    for t in tickers:
        t.join(60)
    done.set()
    for t in submitters:
        t.join(30)
    assert not errors, errors
    assert sorted(rows) == sorted((f"dl{g:03d}", "created") for g in range(1, 401))
