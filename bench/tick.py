#!/usr/bin/env python3
"""What a tick costs: runq.tick(100) with 100 schedules due, beside the same
with many more schedules that are not due, and a tick that finds nothing.

    bench/tick.py                              100 and 10,000 schedules
    bench/tick.py --schedules 100 10000 100000 --ticks 500

For each size N, a database of its own (runq_tick_<pid>_<N>, dropped at the
end) with N schedules: 100 due every minute ('* * * * *') and N - 100 due on
1 January ('0 0 1 1 *'). Each measured tick is `SELECT * FROM runq.tick(100)`
from one autocommit connection over the server's socket, timed in this
process (the round trip and the commit included), with synchronous_commit on
and off:

- due: before each tick, untimed, the runs the previous tick created are
  cancelled (runq.cancel) and the 100 schedules' next slot set back to the
  current minute, so each tick creates 100 runs, each with its run.created
  event, and advances 100 schedules;
- nothing due: the same schedules, none due (the 100 moved a day on), so
  each tick reads the head of the due index and stops.

Sizes and settings are interleaved over --reps repetitions; p50 and p99 are
over all of a case's ticks. Shared buffers hit or read per tick are from
EXPLAIN (ANALYZE, BUFFERS) of one tick of each case, after the timed ones.
Uses RUNQ_DATABASE_URL, or starts the throwaway cluster with scripts/pg.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg
from run import PGBIN, ROOT, percentile, server_url, with_db  # bench/run.py, beside this file

HERE = Path(__file__).resolve().parent
DUE = 100
TICK = "SELECT * FROM runq.tick(100)"
REARM = """
SELECT count(runq.cancel(r.run_id)) FROM runq.runs AS r WHERE r.status = 'queued';
UPDATE runq.schedule_settings SET next_slot = date_trunc('minute', clock_timestamp())
 WHERE name LIKE 'due-%';
"""


def load(admin: str, n: int) -> str:
    db = f"runq_tick_{os.getpid()}_{n}"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{db}"')
    url = with_db(admin, db)
    subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", url,
                    "-f", str(ROOT / "sql/runq.sql")], check=True, capture_output=True)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("""SELECT count(runq.create_schedule('due-' || g, 'bench', 'bench.tick',
                                                       cron => '* * * * *'))
                       FROM generate_series(1, %s) AS g""", [DUE])
        c.execute("""SELECT count(runq.create_schedule('yearly-' || g, 'bench', 'bench.tick',
                                                       cron => '0 0 1 1 *'))
                       FROM generate_series(1, %s) AS g""", [n - DUE])
        c.execute("VACUUM ANALYZE runq.schedule_settings")
    return url


def ticks(conn: psycopg.Connection[Any], count: int, due: bool) -> list[float]:
    """count ticks, in ms; each creates DUE runs when due, else none."""
    times = []
    if not due:
        conn.execute("UPDATE runq.schedule_settings SET next_slot = now() + interval '1 day'"
                     " WHERE name LIKE 'due-%'")
    for _ in range(count):
        if due:
            conn.execute(REARM)
        started = time.perf_counter()
        rows = conn.execute(TICK, prepare=True).fetchall()
        times.append((time.perf_counter() - started) * 1000)
        # A minute that turned between the re-arm and the tick adds a missed row.
        made = sum(1 for r in rows if r[3] == "created")
        if made != (DUE if due else 0) or any(r[3] not in ("created", "missed") for r in rows):
            sys.exit(f"a tick {'with' if due else 'without'} due slots returned {rows[:3]}...")
    return times


def buffers(conn: psycopg.Connection[Any], due: bool) -> int:
    if due:
        conn.execute(REARM)
    plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {TICK}"))
    found = re.search(r"Buffers: shared((?: \w+=\d+)+)", plan)
    return sum(int(v) for k, v in re.findall(r"(hit|read)=(\d+)", found.group(1))) if found else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedules", type=int, nargs="+", default=[100, 10_000],
                    help="schedules in the database, 100 of them due (one size each)")
    ap.add_argument("--ticks", type=int, default=200, help="ticks per case and repetition")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions")
    ap.add_argument("--out", type=Path, default=HERE / "results/tick.md",
                    help="also write the report here")
    opts = ap.parse_args()
    if min(opts.schedules) < DUE:
        ap.error(f"--schedules: at least {DUE}")
    admin = server_url()
    urls = {n: load(admin, n) for n in opts.schedules}
    conns = {n: psycopg.connect(u, autocommit=True) for n, u in urls.items()}
    cases = [(n, sync, due) for n in opts.schedules for sync in ("on", "off")
             for due in (True, False)]
    times: dict[tuple[int, str, bool], list[float]] = defaultdict(list)
    try:
        for _ in range(opts.reps):
            for n, sync, due in cases:
                conns[n].execute(f"SET synchronous_commit = {sync}")
                times[(n, sync, due)] += ticks(conns[n], opts.ticks, due)
        hits = {(n, due): buffers(conns[n], due) for n in opts.schedules for due in (True, False)}
        with psycopg.connect(admin) as c:
            version = c.execute("SELECT version()").fetchone()[0].split(",")[0]
            fsync = c.execute("SHOW fsync").fetchone()[0]
    finally:
        for c in conns.values():
            c.close()
        with psycopg.connect(admin, autocommit=True) as c:
            for n in urls:
                c.execute(f'DROP DATABASE IF EXISTS "runq_tick_{os.getpid()}_{n}" WITH (FORCE)')

    base = opts.schedules[0]
    lines = [f"Ticks (`bench/tick.py --schedules {' '.join(map(str, opts.schedules))}"
             f" --ticks {opts.ticks} --reps {opts.reps}`), {time.strftime('%Y-%m-%d')}:"
             f" {os.cpu_count()} cores, {version}, fsync={fsync}. `runq.tick(100)` from one"
             f" connection, {opts.ticks * opts.reps} ticks a case; due: 100 schedules due,"
             " 100 runs created a tick.", "",
             "| schedules | due | synchronous_commit | p50 (ms) | p99 (ms) | p50 / "
             f"{base:,} schedules | buffers a tick |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for n, sync, due in sorted(cases, key=lambda c: (not c[2], c[1] == "off", c[0])):
        t = times[(n, sync, due)]
        ratio = percentile(t, 50) / percentile(times[(base, sync, due)], 50)
        lines.append(f"| {n:,} | {'100' if due else 'none'} | {sync} | {percentile(t, 50):.2f}"
                     f" | {percentile(t, 99):.2f} | **{ratio:.2f}** | {hits[(n, due)]:,} |")
    print("\n".join(lines))
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
