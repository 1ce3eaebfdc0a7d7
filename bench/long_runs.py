#!/usr/bin/env python3
"""Long agent runs: one worker process holding N runs in flight for minutes.

    bench/long_runs.py                         1,000 runs of 5 minutes
    bench/long_runs.py --runs 1000 5000        one size after the other (make bench-long)
    bench/long_runs.py --runs 20 --minutes 0.5 --sleep 1 3    a smoke run

For each size: a database of its own (runq_long_<pid>_<N>, dropped at the
end, with track_functions = 'pl'), N runs submitted in one statement, then
one worker process, `python -m runq.pool long_runs --slot 10:N --lease 30`
(the handlers are HANDLERS below). Each run is an async handler that loops
for --minutes over `await asyncio.sleep(uniform(5, 20))`, writing
`begin_turn` and `checkpoint` at each step, then returns. Once all N are
running the window opens; it closes just before the first run can end. Then
the runs complete and the worker gets SIGTERM.

Every second the driver samples pg_stat_activity (the worker's backends:
application_name LIKE 'runq-pool%' in the database, which is its own), the
backends' CPU time (utime + stime from /proc/<pid>/stat: Linux, and the
server on this machine), the runs' states and the nearest lease expiry, and
pg_stat_user_functions. Heartbeats are counted server-side: calls of
runq.heartbeat_many times the runs in flight, which is N for the whole
window. The window's ends are samples taken while the heartbeat backend has
been idle for over 1.5 s, so that its CPU time and the function counts (a
backend flushes them within a second of going idle) cover the same calls.

A lease lost is a run.fenced or run.requeued event; the script exits 1 if
there is one, or if a run did not succeed. Uses RUNQ_DATABASE_URL, or starts
the throwaway cluster with scripts/pg.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from run import PGBIN, ROOT, server_url, with_db  # bench/run.py, beside this file

HERE = Path(__file__).resolve().parent
KIND = "bench.long"
TICKS = os.sysconf("SC_CLK_TCK")
QUIET = 1.5  # seconds the heartbeat backend has been idle at a window's end


# -- the worker's side: python -m runq.pool long_runs ------------------------------


async def long_run(ctx: Any) -> dict[str, int]:
    seconds = float(os.environ.get("RUNQ_LONG_SECONDS", "300"))
    low, high = (float(x) for x in os.environ.get("RUNQ_LONG_SLEEP", "5,20").split(","))
    ends = time.monotonic() + seconds
    steps = 0
    while (left := ends - time.monotonic()) > 0:
        await asyncio.sleep(min(random.uniform(low, high), left))
        await ctx.begin_turn()
        await ctx.checkpoint({"step": steps})
        steps += 1
    return {"steps": steps}


HANDLERS = {KIND: long_run}


# -- the driver ----------------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def one(conn: psycopg.Connection[Any], query: str) -> tuple[Any, ...]:
    row: tuple[Any, ...] | None = conn.execute(query).fetchone()
    assert row is not None
    return row


@dataclass
class Sample:
    t: float                    # seconds since the worker started
    connections: int
    running: int
    finished: int
    margin: float | None        # seconds left on the nearest lease
    quiet: bool                 # the heartbeat backend idle for QUIET s
    calls: dict[str, tuple[int, float]]  # function -> (calls, total ms)
    cpu: dict[int, float]       # backend pid -> CPU seconds
    worker_cpu: float | None
    heartbeat_pid: int | None


@dataclass
class Result:
    runs: int
    seconds: float
    succeeded: int = 0
    lost: int = 0
    claims: int = 0
    steps: int = 0
    max_connections: int = 0
    min_margin: float | None = None
    window: float = 0.0
    heartbeat_calls: int = 0
    heartbeat_ms: float = 0.0
    window_steps: int = 0
    heartbeat_cpu: float | None = None
    backends_cpu: float | None = None
    worker_cpu: float | None = None
    exit_code: int | None = None
    settings: str = ""          # synchronous_commit and fsync in the database
    problems: list[str] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return not self.problems and self.lost == 0 and self.succeeded == self.runs


FUNCTIONS = ("heartbeat_many", "begin_turn", "checkpoint")


def sample(conn: Any, db: str, t: float, worker: int) -> Sample:
    backends = conn.execute(
        "SELECT pid, application_name, state,"
        "       extract(epoch FROM clock_timestamp() - state_change)::float8"
        "  FROM pg_stat_activity WHERE datname = %s AND application_name LIKE 'runq-pool%%'",
        (db,)).fetchall()
    heartbeat = [b for b in backends if b[1] == "runq-pool-heartbeat"]
    running, finished, margin = conn.execute(
        "SELECT count(*) FILTER (WHERE status = 'running'),"
        "       count(*) FILTER (WHERE finished_at IS NOT NULL),"
        "       extract(epoch FROM min(lease_expires_at) - clock_timestamp())::float8"
        "  FROM runq.runs").fetchone()
    calls = {name: (n, ms) for name, n, ms in conn.execute(
        "SELECT funcname, calls, total_time FROM pg_stat_user_functions"
        " WHERE schemaname = 'runq' AND funcname = ANY(%s)", (list(FUNCTIONS),))}
    cpu = {pid: s for pid, *_ in backends if (s := cpu_seconds(pid)) is not None}
    return Sample(t, len(backends), running, finished, margin,
                  len(heartbeat) == 1 and heartbeat[0][2] == "idle" and heartbeat[0][3] > QUIET,
                  calls, cpu, cpu_seconds(worker), heartbeat[0][0] if heartbeat else None)


def measure(admin: str, n: int, seconds: float, sleep: tuple[float, float], log: Path) -> Result:
    db = f"runq_long_{os.getpid()}_{n}"
    url = with_db(admin, db)
    result = Result(n, seconds)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'")
                     .format(sql.Identifier(db)))
    worker = None
    try:
        subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", url,
                        "-f", str(ROOT / "sql/runq.sql")], check=True, capture_output=True)
        with psycopg.connect(url, autocommit=True) as conn, log.open("w") as out:
            conn.execute("SELECT count(*) FROM generate_series(1, %s) AS g,"
                         " LATERAL runq.submit('bench', %s, jsonb_build_object('n', g)) AS s",
                         (n, KIND))
            started = time.monotonic()
            worker = subprocess.Popen(
                [sys.executable, "-m", "runq.pool", "long_runs", "--database-url", url,
                 "--slot", f"10:{n}", "--lease", "30"],
                cwd=HERE, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "RUNQ_LONG_SECONDS": str(seconds),
                     "RUNQ_LONG_SLEEP": f"{sleep[0]},{sleep[1]}"})
            samples = watch(conn, db, worker, n, started, seconds, result)
            result.lost, result.claims, result.succeeded, result.steps = one(conn,
                "SELECT (SELECT count(*) FROM runq.run_events"
                "         WHERE type IN ('run.fenced', 'run.requeued')),"
                "       (SELECT count(*) FROM runq.run_events WHERE type = 'run.claimed'),"
                "       (SELECT count(*) FROM runq.runs WHERE status = 'succeeded'),"
                "       (SELECT coalesce(sum(turns), 0) FROM runq.runs)")
            result.settings = "synchronous_commit={}, fsync={}".format(*one(
                conn, "SELECT current_setting('synchronous_commit'), current_setting('fsync')"))
        summarize(samples, n, seconds, result)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(db)))
    return result


def watch(conn: Any, db: str, worker: subprocess.Popen[bytes], n: int, started: float,
          seconds: float, result: Result) -> list[Sample]:
    """Samples every second until the worker exits: N running, then all of
    them finished (SIGTERM then), or a deadline passed."""
    samples: list[Sample] = []
    give_up = started + seconds + 120
    terminated = None
    while worker.poll() is None:
        now = time.monotonic()
        s = sample(conn, db, now - started, worker.pid)
        samples.append(s)
        if terminated is None and (s.finished == n or now > give_up):
            if s.finished < n:
                result.problems.append(f"{n - s.finished} runs had not finished"
                                       f" {give_up - started:.0f} s after the worker started")
            worker.send_signal(signal.SIGTERM)
            terminated = now
        if terminated is not None and now > terminated + 30:
            result.problems.append("the worker did not exit within 30 s of SIGTERM")
            worker.kill()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
    result.exit_code = worker.wait()
    if result.exit_code != 0:
        result.problems.append(f"the worker exited with {result.exit_code}")
    return samples


def summarize(samples: list[Sample], n: int, seconds: float, result: Result) -> None:
    result.max_connections = max((s.connections for s in samples), default=0)
    margins = [s.margin for s in samples if s.margin is not None]
    result.min_margin = min(margins) if margins else None
    # The first run can end no sooner than `seconds` after the worker started.
    inside = [s for s in samples if s.running == n and s.t < seconds - 1]
    quiet = [s for s in inside if s.quiet and s.heartbeat_pid is not None]
    if len(quiet) < 2 or quiet[0].heartbeat_pid != quiet[-1].heartbeat_pid:
        result.problems.append("no measurement window: the runs never all ran together"
                               " between two quiet heartbeat samples")
        return
    first, last = quiet[0], quiet[-1]
    result.window = last.t - first.t

    def delta(name: str) -> tuple[int, float]:
        c0, ms0 = first.calls.get(name, (0, 0.0))
        c1, ms1 = last.calls.get(name, (0, 0.0))
        return c1 - c0, ms1 - ms0

    result.heartbeat_calls, result.heartbeat_ms = delta("heartbeat_many")
    result.window_steps = delta("checkpoint")[0]
    pid = first.heartbeat_pid
    if pid in first.cpu and pid in last.cpu:
        result.heartbeat_cpu = last.cpu[pid] - first.cpu[pid]
    # Each backend's last reading in the window, less its first (0 for one
    # that connected meanwhile).
    window = [s for s in samples if first.t <= s.t <= last.t]
    seen: dict[int, float] = {}
    for s in window:
        seen.update(s.cpu)
    if seen:
        result.backends_cpu = sum(v - first.cpu.get(p, 0.0) for p, v in seen.items())
    if first.worker_cpu is not None and last.worker_cpu is not None:
        result.worker_cpu = last.worker_cpu - first.worker_cpu


def report(results: list[Result], admin: str, sleep: tuple[float, float]) -> list[str]:
    with psycopg.connect(admin, autocommit=True) as conn:
        version = one(conn, "SHOW server_version")[0]
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    minutes = results[0].seconds / 60
    lines = [
        f"Long agent runs (`bench/long_runs.py`), {time.strftime('%Y-%m-%d')}:"
        f" {os.cpu_count()} cores, {ram:.0f} GB RAM, PostgreSQL {version},"
        f" {results[0].settings},"
        f" load average {os.getloadavg()[0]:.1f} at the end. One worker process"
        f" (`python -m runq.pool`, lease 30 s); each run an async handler looping"
        f" {minutes:g} min over `sleep(uniform({sleep[0]:g}, {sleep[1]:g}))`, each step"
        " `begin_turn` + `checkpoint`.", ""]

    def us(total: float | None, count: int, per: int = 1) -> str:
        return "n/a" if total is None or not count else f"{total * 1e6 * per / count:,.0f}"

    def ms(total: float | None, count: int, per: int = 1) -> str:
        return "n/a" if total is None or not count else f"{total * 1e3 * per / count:,.1f}"

    rows: list[tuple[str, list[str]]] = [
        ("runs succeeded", [f"{r.succeeded:,} / {r.runs:,}" for r in results]),
        ("leases lost (run.fenced + run.requeued)", [f"{r.lost:,}" for r in results]),
        ("claims", [f"{r.claims:,}" for r in results]),
        ("steps written (begin_turn + checkpoint)", [f"{r.steps:,}" for r in results]),
        ("nearest lease expiry seen (s left of 30)",
         ["n/a" if r.min_margin is None else f"{r.min_margin:.1f}" for r in results]),
        ("max server connections of the worker", [f"{r.max_connections}" for r in results]),
        ("window (all runs in flight), s", [f"{r.window:.0f}" for r in results]),
        ("heartbeat_many calls in the window", [f"{r.heartbeat_calls:,}" for r in results]),
        ("run heartbeats in the window (calls x runs)",
         [f"{r.heartbeat_calls * r.runs:,}" for r in results]),
        ("heartbeat_many, ms per call", [ms(r.heartbeat_ms / 1e3, r.heartbeat_calls)
                                         for r in results]),
        ("heartbeat backend CPU per 1,000 run heartbeats, ms",
         [ms(r.heartbeat_cpu, r.heartbeat_calls * r.runs, 1000) for r in results]),
        ("all worker backends' CPU in the window, s",
         ["n/a" if r.backends_cpu is None else f"{r.backends_cpu:.1f}" for r in results]),
        ("steps in the window", [f"{r.window_steps:,}" for r in results]),
        ("worker backends' CPU per step, µs", [us(r.backends_cpu, r.window_steps)
                                              for r in results]),
        ("worker process CPU per step, µs", [us(r.worker_cpu, r.window_steps)
                                            for r in results]),
    ]
    lines.append("| figure | " + " | ".join(f"{r.runs:,} runs" for r in results) + " |")
    lines.append("| --- |" + " ---: |" * len(results))
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
    for r in results:
        lines += [f"\n{r.runs:,} runs: {p}" for p in r.problems]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1000],
                    help="runs in flight, one measurement per size")
    ap.add_argument("--minutes", type=float, default=5.0, help="how long each run lasts")
    ap.add_argument("--sleep", type=float, nargs=2, default=(5.0, 20.0), metavar=("LOW", "HIGH"),
                    help="seconds between steps, uniform in [LOW, HIGH]")
    ap.add_argument("--out", type=Path, default=HERE / "results/long_runs.md",
                    help="also write the report here")
    opts = ap.parse_args()
    admin = server_url()
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    results = []
    for n in opts.runs:
        log = opts.out.with_name(f"{opts.out.stem}_{n}.log")
        print(f"{n} runs for {opts.minutes:g} min (worker log: {log})", file=sys.stderr,
              flush=True)
        results.append(measure(admin, n, opts.minutes * 60, tuple(opts.sleep), log))
    lines = report(results, admin, tuple(opts.sleep))
    print("\n".join(lines))
    opts.out.write_text("\n".join(lines) + "\n")
    return 0 if all(r.held for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
