#!/usr/bin/env python3
"""CPU time of the server backend per claim + complete cycle, for before/after.

    bench/cpu.py                      the minimal queue, the floor, runq (without
                                      concurrency limits, with limits never reached,
                                      with half the tenants at their limit)
    bench/cpu.py --rev 8ce5eac        ... and the same of runq as it was at a commit
                                      (here v0.1.0, which has no limits: one)
    bench/cpu.py --cycles 8000 --reps 9

Throughput ratios move by about 5 % from run to run on a small machine, which
hides a change that saves 3 %. The CPU time the one backend serving a
pgbench client spends per cycle moves far less, so this is what a change to
the hot path is judged by: one client, `-t cycles` transactions of the
cycle scripts, the backend's utime + stime read from /proc/<pid>/stat
(Linux, and the server on this machine: scripts/pg's cluster), repetitions
interleaved across the queues, medians reported. Each queue gets its own
database (bench_cpu_<name>), dropped at the end. Uses RUNQ_DATABASE_URL, or
starts the throwaway cluster with scripts/pg.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from run import HERE, PGBIN, ROOT, server_url, with_db  # bench/run.py, beside this file

TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Queue:
    name: str       # also the database's suffix
    script: str     # bench/cycle_<kind>.pgbench
    reset: tuple[str, ...]


def runq_queue(name: str, limits: str = "") -> Queue:
    # limits "unreached": a tenant and a kind limit that every run falls under
    # but none reaches, so each run is admitted and its slot handed on to
    # nobody. "saturated": the supply dealt round 12 tenants, the first 6 at
    # a limit of 2, so half the runs wait parked and each of their completions
    # admits the next (set after the load: set_limit parks the backlog).
    tenant = "'t' || g %% 12" if limits == "saturated" else "'bench'"
    before = (("SELECT runq.set_limit('tenant', NULL, 1000000),"
               " runq.set_limit('kind', NULL, 1000000)",) if limits == "unreached" else ())
    after = (("SELECT runq.set_limit('tenant', 't' || g, 2) FROM generate_series(0, 5) AS g",)
             if limits == "saturated" else ())
    return Queue(name, "cycle_runq.pgbench", (
        *before,
        "TRUNCATE runq.runs, runq.run_events, runq.checkpoints, runq.inputs,"
        " runq.tool_calls, runq.idempotency_keys CASCADE",
        "INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)"
        f" SELECT clock_timestamp(), now(), 10, {tenant}, 'bench.cycle'"
        " FROM generate_series(1, %(supply)s) AS g",
        *after,
        "VACUUM ANALYZE runq.runs, runq.run_events"))


LABELS = {"": "", "unreached": ", limits set, never reached",
          "saturated": ", 6 of 12 tenants at a limit of 2"}


MINQ = Queue("minq", "cycle_minq.pgbench", (
    "TRUNCATE bench_minq",
    "INSERT INTO bench_minq (state) SELECT 0 FROM generate_series(1, %(supply)s)",
    "VACUUM ANALYZE bench_minq"))
FLOOR = Queue("floor", "cycle_floor.pgbench", (
    "TRUNCATE bench_floor, bench_floor_events",
    "INSERT INTO bench_floor (state) SELECT 0 FROM generate_series(1, %(supply)s)",
    "VACUUM ANALYZE bench_floor, bench_floor_events"))


def schema_sql(rev: str | None) -> str:
    """sql/runq.sql of the working tree, or as committed at rev."""
    if rev is None:
        return (ROOT / "sql/runq.sql").read_text()
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:sql/runq.sql"],
                           capture_output=True, text=True)
    if shown.returncode != 0:
        sys.exit(f"no sql/runq.sql at {rev}: {shown.stderr.strip()}")
    return shown.stdout


def create_db(admin: str, url: str, db: str, schema: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
    subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", url,
                    "-f", "-", "-f", str(HERE / "references.sql")],
                   input=schema, check=True, capture_output=True, text=True)


def backend_cpu_per_cycle(url: str, queue: Queue, cycles: int) -> float:
    """Microseconds of CPU the pgbench client's backend spent per cycle."""
    with psycopg.connect(url, autocommit=True) as conn:
        for stmt in queue.reset:
            conn.execute(stmt, {"supply": cycles + 1000} if "%(" in stmt else None)
        conn.execute("CHECKPOINT")
        # The client's backend runs the cycles and nothing else; find it by
        # its application_name once it has run a statement (pgbench's first
        # connection, which only sets up, runs none), and sample its counters
        # until it exits (the last sample is its total).
        app = f"bench_cpu_{os.getpid()}"
        bench = subprocess.Popen(
            [str(PGBIN / "pgbench"), "-n", "-M", "prepared", "-c", "1", "-t", str(cycles),
             "-f", str(HERE / queue.script), url],
            env={**os.environ, "PGAPPNAME": app},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = None
        while pid is None and bench.poll() is None:
            row = conn.execute("SELECT pid FROM pg_stat_activity"
                               " WHERE application_name = %s AND query <> ''",
                               (app,)).fetchone()
            if row:
                pid = row[0]
            else:
                time.sleep(0.002)
    ticks = 0
    while bench.poll() is None:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])  # utime, stime
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.005)
    out, err = bench.communicate()
    if bench.returncode != 0 or not ticks or not re.search(r"tps = ", out):
        sys.exit(f"pgbench {queue.script} failed:\n{out}\n{err}")
    return ticks * TICK_US / cycles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", action="append", default=[],
                    help="also measure runq as committed at this git revision (repeatable)")
    ap.add_argument("--cycles", type=int, default=6000, help="cycles per measurement")
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions")
    args = ap.parse_args()

    admin = server_url()
    queues = [(MINQ, None), (FLOOR, None)]
    labels = {"minq": "minimal queue", "floor": "floor"}
    for rev in (None, *args.rev):
        at = "" if rev is None else "_" + re.sub(r"[^a-z0-9]", "_", rev.lower())
        has_limits = "FUNCTION runq.set_limit(" in schema_sql(rev)
        for limits, label in LABELS.items():
            if limits and not has_limits:
                continue
            name = f"runq{at}{'_' + limits if limits else ''}"
            queues.append((runq_queue(name, limits), rev))
            labels[name] = f"runq{' (working tree)' if rev is None else ' at ' + rev}{label}"
    urls = {}
    for queue, rev in queues:
        db = f"bench_cpu_{queue.name}"
        urls[queue.name] = with_db(admin, db)
        create_db(admin, urls[queue.name], db, schema_sql(rev))
    samples: dict[str, list[float]] = {q.name: [] for q, _ in queues}
    try:
        for _ in range(args.reps):
            for queue, _ in queues:
                samples[queue.name].append(backend_cpu_per_cycle(urls[queue.name], queue,
                                                                 args.cycles))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for queue, _ in queues:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                             .format(sql.Identifier(f"bench_cpu_{queue.name}")))

    runq = statistics.median(samples["runq"])
    print(f"Backend CPU per claim + complete cycle: 1 client, {args.cycles} cycles,"
          f" median of {args.reps} interleaved repetitions\n")
    print("| queue | µs per cycle | range | / runq (working tree) |")
    print("| --- | ---: | ---: | ---: |")
    for queue, _ in queues:
        xs = samples[queue.name]
        print(f"| {labels[queue.name]} | {statistics.median(xs):.0f} | {min(xs):.0f}-{max(xs):.0f}"
              f" | {statistics.median(xs) / runq:.3f} |")


if __name__ == "__main__":
    main()
