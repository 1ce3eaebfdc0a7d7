"""A new run's NOTIFY runq only while a worker may be idle (deploy/wake_idle.sql).

A submit notifies when a claim came back short in the last minute (the idle
mark, runq.idle_mark) and not otherwise; and no wake-up is lost between a
worker that goes idle and a submit that commits meanwhile: workers that wait
on LISTEN alone, never polling, get every run of their class in time. Each
test has a database of its own, where no claim has marked anyone idle yet.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import psycopg
from pgutil import guard_thread

Connection = psycopg.Connection[Any]


def submit(c: Connection, priority: int) -> int:
    return int(c.execute("SELECT run_id FROM runq.submit('wk', 'wk.k', priority => %s)",
                         [priority]).fetchone()[0])


def claim(c: Connection, priority: int) -> list[tuple[int, int]]:
    rows = c.execute("SELECT run_id, epoch FROM runq.claim(ARRAY[%s]::integer[], 'w-wk')",
                     [priority]).fetchall()
    return [(int(r[0]), int(r[1])) for r in rows]


def notified(listener: Connection, seconds: float) -> int:
    return len(list(listener.notifies(timeout=seconds)))


def test_a_submit_notifies_only_after_a_short_claim(connect: Any) -> None:
    listener, submitter = connect(), connect()
    listener.execute("LISTEN runq")
    for _ in range(20):
        submit(submitter, 9700)
    assert notified(listener, 1.0) == 0, "submits notified with no worker idle"

    assert claim(listener, 9799) == []  # a worker comes back short: idle
    submit(submitter, 9700)
    assert notified(listener, 5.0) >= 1, "a submit did not wake the idle worker"

    # A full claim marks nobody: the mark stays that of the short one.
    mark = "SELECT pg_sequence_last_value('runq.idle_mark')"
    before = submitter.execute(mark).fetchone()[0]
    assert len(claim(listener, 9700)) == 1
    assert submitter.execute(mark).fetchone()[0] == before


def test_the_idle_mark_lasts_a_minute(connect: Any) -> None:
    listener, submitter = connect(), connect()
    listener.execute("LISTEN runq")
    now_ms = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    submitter.execute(f"SELECT setval('runq.idle_mark', {now_ms} - 61000)")
    submit(submitter, 9701)
    assert notified(listener, 1.0) == 0, "a mark of 61 s ago still woke the workers"
    submitter.execute(f"SELECT setval('runq.idle_mark', {now_ms} - 55000)")
    submit(submitter, 9701)
    assert notified(listener, 5.0) >= 1, "a mark of 55 s ago did not wake the workers"


def test_a_run_scheduled_for_later_wakes_nobody(connect: Any) -> None:
    listener, submitter = connect(), connect()
    listener.execute("LISTEN runq")
    assert claim(listener, 9799) == []
    submitter.execute("SELECT runq.submit('wk', 'wk.k', priority => 9702,"
                      " scheduled_for => now() + interval '1 hour')")
    assert notified(listener, 1.0) == 0


ROUNDS = 200
WAIT = 30.0     # how long the idle worker waits on LISTEN: it never polls
ON_TIME = 5.0   # seconds from the round's start to the run's claim, at most


def test_no_wake_up_is_lost(connect: Any) -> None:
    """The race the wake lock closes: a worker comes back short for the first
    time in a minute (the mark is stale: nobody was idle) while a submit
    commits. The submit may read the mark before the worker sets it; then it
    does not notify, and the worker's last look must see its run. Each round
    stales the mark, then lets the worker claim and the submitter submit at
    once, a random few hundred microseconds apart. A wake-up lost leaves the
    worker waiting on LISTEN, which it does for 30 s without polling; the
    run must be claimed within 5 s."""
    errors: list[BaseException] = []
    stop = threading.Event()
    start = threading.Barrier(3, timeout=60)
    done = threading.Barrier(3, timeout=60)  # the main thread stales the mark between rounds
    late: list[tuple[int, float]] = []
    admin, worker_conn, listening, submitter_conn = connect(), connect(), connect(), connect()
    listening.execute("LISTEN runq")

    def worker() -> None:
        for rnd in range(ROUNDS):
            start.wait()
            began = time.monotonic()
            got = claim(worker_conn, 9710)
            while not got and time.monotonic() - began < WAIT:
                for _ in listening.notifies(timeout=WAIT, stop_after=1):
                    pass
                got = claim(worker_conn, 9710)
            took = time.monotonic() - began
            if took > ON_TIME:
                late.append((rnd, took))
            for run_id, epoch in got:
                worker_conn.execute("SELECT runq.complete(%s, %s)", [run_id, epoch])
            done.wait()
            if stop.is_set():
                return

    def submitter() -> None:
        rng = random.Random(9710)
        for _ in range(ROUNDS):
            start.wait()
            time.sleep(rng.choice((0, 0, 0.0001, 0.0002, 0.0005, 0.001)))
            submit(submitter_conn, 9710)
            done.wait()
            if stop.is_set():
                return

    threads = [threading.Thread(target=guard_thread(body, errors, stop))
               for body in (worker, submitter)]
    for t in threads:
        t.start()
    for _ in range(ROUNDS):
        # Nobody idle for a minute, as far as the mark says.
        admin.execute("SELECT setval('runq.idle_mark', 1)")
        for _ in listening.notifies(timeout=0.001):  # what the last round left
            pass
        try:
            start.wait()
            done.wait()
        except threading.BrokenBarrierError:
            break
        if stop.is_set() or late:
            break
    stop.set()
    start.abort()
    done.abort()
    for t in threads:
        t.join(WAIT + 10)
    errors = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    assert not errors, errors
    assert not late, f"rounds whose run was claimed late (a wake-up lost): {late}"
    left = "SELECT count(*) FROM runq.runs WHERE priority = 9710 AND status = 'queued'"
    assert admin.execute(left).fetchone()[0] == 0
