#!/usr/bin/env python3
"""Child runs: one parent spawning --children children and waiting for them,
the time from the last child's completion to the parent's resumed claim,
and what a spawn costs beside a submit.

    bench/children.py                          1,000 children, 5 reps
    bench/children.py --children 50 --reps 2   a smoke run

A database of its own (runq_children_<pid>, dropped at the end). Each rep:

* spawn and submit: a parent is submitted and claimed; then --children
  calls of runq.spawn (one child each, keys c0, c1, ...) and --children calls
  of runq.submit (one run each, no key, no session), interleaved in blocks of
  50 so that both meet the same table; time per call, median of the blocks.
  One connection, autocommit, prepared statements (as a driver sends them).
* wait_children: the time of the parent's runq.wait_children, which counts
  (and locks FOR SHARE) the children it waits for.
* wake: a waiter thread listens (LISTEN runq) on a connection of its own
  and, on each notification, claims the parent's kind on another; the main thread claims
  the children (max_runs 100) and completes them one call each. The wake is
  the time from the return of the last child's complete (its commit, which
  queued the parent) to the return of the waiter's claim of the parent as a
  resumed run. One process, one clock (time.perf_counter).

Uses RUNQ_DATABASE_URL, or starts the throwaway cluster with scripts/pg.
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import psycopg

from run import scratch_database  # bench/run.py, beside this file

BLOCK = 50


def timed_blocks(conn: psycopg.Connection, parent: int, epoch: int, n: int) -> tuple[float, float]:
    """Median seconds per spawn and per submit, over blocks of BLOCK calls each, in turn."""
    spawn: list[float] = []
    submit: list[float] = []
    for start in range(0, n, BLOCK):
        size = min(BLOCK, n - start)
        t0 = time.perf_counter()
        for i in range(start, start + size):
            conn.execute("SELECT runq.spawn(%s, %s, %s, 'bench.child', %s::jsonb)",
                         (parent, epoch, f"c{i}", f'{{"i": {i}}}'), prepare=True)
        t1 = time.perf_counter()
        for i in range(start, start + size):
            conn.execute("SELECT runq.submit('bench', 'bench.other', %s::jsonb)",
                         (f'{{"i": {i}}}',), prepare=True)
        t2 = time.perf_counter()
        spawn.append((t1 - t0) / size)
        submit.append((t2 - t1) / size)
    return statistics.median(spawn), statistics.median(submit)


def waiter(url: str, ready: threading.Event, out: list[float]) -> None:
    """Claims the parent (kind bench.parent) as soon as a notification says it may be there.

    The listening connection does nothing but wait for notifications (one that
    arrived while it ran a query would not be yielded); the claims go through
    a second connection."""
    with psycopg.connect(url, autocommit=True) as listener, \
            psycopg.connect(url, autocommit=True) as conn:
        listener.execute("LISTEN runq")
        ready.set()
        for _ in listener.notifies():
            row = conn.execute("SELECT run_id, resumed FROM runq.claim(ARRAY[10], 'bench-waiter',"
                               " NULL, 1, ARRAY['bench.parent'])").fetchone()
            if row is not None:
                out.append(time.perf_counter())
                assert row[1], "the parent's claim after its children is a resumed one"
                conn.execute("SELECT runq.complete(%s, 2, NULL)", (row[0],))
                return


def rep(url: str, children: int) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        parent = conn.execute("SELECT run_id FROM runq.submit('bench', 'bench.parent')").fetchone()
        assert parent is not None
        row = conn.execute("SELECT run_id, epoch FROM runq.claim(ARRAY[10], 'bench', NULL, 1,"
                           " ARRAY['bench.parent'])").fetchone()
        assert row is not None and row[0] == parent[0]
        run_id, epoch = row
        spawn, submit = timed_blocks(conn, run_id, epoch, children)
        conn.execute("DELETE FROM runq.runs WHERE kind = 'bench.other'")  # the submits' runs: not claimed

        ready = threading.Event()
        claimed: list[float] = []
        thread = threading.Thread(target=waiter, args=(url, ready, claimed))
        thread.start()
        ready.wait()
        t0 = time.perf_counter()
        waited = conn.execute("SELECT runq.wait_children(%s, %s)", (run_id, epoch)).fetchone()
        wait_s = time.perf_counter() - t0
        assert waited == (True,)

        done = 0
        last = 0.0
        while done < children:
            batch = conn.execute("SELECT run_id, epoch FROM runq.claim(ARRAY[10], 'bench', NULL, 100,"
                                 " ARRAY['bench.child'])").fetchall()
            for child, child_epoch in batch:
                conn.execute("SELECT runq.complete(%s, %s, '{}'::jsonb)", (child, child_epoch),
                             prepare=True)
                last = time.perf_counter()
                done += 1
        thread.join(timeout=300)
        assert claimed, "the parent was not claimed after its last child"
        # The same span by the server's clock: the last child's run.succeeded
        # (stamped as its complete started) to the parent's run.claimed.
        server = conn.execute(
            "SELECT extract(epoch FROM"
            " (SELECT max(e.created_at) FROM runq.run_events AS e WHERE e.run_id = %s"
            "   AND e.type = 'run.claimed')"
            " - (SELECT max(e.created_at) FROM runq.run_events AS e"
            "     JOIN runq.spawns AS s ON s.run_id = e.run_id"
            "    WHERE s.parent_run_id = %s AND e.type = 'run.succeeded'))::float8",
            (run_id, run_id)).fetchone()
        assert server is not None
        return {"spawn": spawn, "submit": submit, "wait": wait_s, "wake": claimed[0] - last,
                "wake_server": server[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--children", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    with scratch_database("runq_children") as (url, version):
        reps = [rep(url, args.children) for _ in range(args.reps)]
    med = {k: statistics.median(r[k] for r in reps) for k in reps[0]}
    low = {k: min(r[k] for r in reps) for k in reps[0]}
    high = {k: max(r[k] for r in reps) for k in reps[0]}

    def ms(key: str) -> str:
        return f"{med[key] * 1000:.2f} ms ({low[key] * 1000:.2f} to {high[key] * 1000:.2f})"

    print(f"PostgreSQL {version}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}, "
          f"{args.children:,} children, median of {args.reps} reps (range)\n")
    print("| measure | value |\n| --- | ---: |")
    print(f"| runq.spawn, per call | {ms('spawn')} |")
    print(f"| runq.submit, per call (same table, interleaved) | {ms('submit')} |")
    print(f"| spawn / submit | {med['spawn'] / med['submit']:.2f} |")
    print(f"| runq.wait_children of the parent of {args.children:,} | {ms('wait')} |")
    print(f"| last child's complete returned -> the parent's resumed claim returned | {ms('wake')} |")
    print(f"| the same, server clock: last child's run.succeeded -> the parent's run.claimed "
          f"| {ms('wake_server')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
