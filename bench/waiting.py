#!/usr/bin/env python3
"""Waiting for runs and streaming their output: wake-up latency, and the
chunks a second one pool and the server sustain.

    bench/waiting.py                          1,000 waits; 1,000 runs x 20 chunks/s x 60 s
    bench/waiting.py --runs 50 --seconds 5    a smoke run

A database of its own (runq_waiting_<pid>, dropped at the end). Two parts,
in one process (the client), against the server on this machine:

1. Waits. --runs runs are claimed; the process waits on all of them at once
   (AsyncClient.wait, one dispatcher: its server connections are counted
   while the waits are pending); a worker thread on a connection of its own
   completes them one at a time, at most --complete-rate a second, noting
   when it sent each complete. Latency: from that moment to the wait
   returning, p50 / p99 (it includes the complete's own round trip, whose
   p50 is given beside it).
2. Streams. One WorkerPool (Slot((10,), runs)) runs --runs async handlers
   that each emit a chunk every 1 / --rate seconds for --seconds (the
   chunk holds the time it was emitted), while another process streams
   every run (AsyncClient.stream: one dispatcher). Reported: chunks stored
   a second (from the first chunk's created_at to the last's), reader lag
   (from ctx.emit to the reader getting the chunk) p50 / p99, and CPU per
   1,000 chunks: the server's (each server process's at the end less at the
   start, /proc/<pid>/stat), the pool's process's and the readers' process's.

Uses RUNQ_DATABASE_URL, or starts the throwaway cluster with scripts/pg.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import threading
import time
from datetime import timedelta
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import psycopg
from run import scratch_database  # bench/run.py, beside this file

from runq import AsyncClient, Client
from runq.pool import AsyncRunContext, Slot, WorkerPool

TICKS = os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def server_cpu(conn: psycopg.Connection[Any]) -> dict[int, float]:
    """CPU seconds of each server process (/proc: the server is on this machine)."""
    out = {}
    for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity").fetchall():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    return out


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def waits(url: str, runs: int, rate: float) -> list[str]:
    with Client.connect(url) as c:
        ids = [c.submit("bench", "bench.wait", priority=3).run_id for _ in range(runs)]
        claimed = {r.run_id: r.epoch for r in c.claim([3], max_runs=runs)}
    sent: dict[int, float] = {}
    took: list[float] = []
    connections: list[int] = []

    async def main() -> dict[int, float]:
        done: dict[int, float] = {}
        async with AsyncClient.connect(url) as client:
            async def one(run_id: int) -> None:
                await client.wait(run_id, timeout=600)
                done[run_id] = time.time()
            tasks = [asyncio.ensure_future(one(r)) for r in ids]
            await asyncio.sleep(2.0)  # every wait is watching
            with psycopg.connect(url) as probe:
                [(n,)] = probe.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                                       " current_database() AND application_name LIKE"
                                       " 'runq-wait%'").fetchall()
                connections.append(int(n))
            worker = threading.Thread(target=complete_all, daemon=True)
            worker.start()
            await asyncio.gather(*tasks)
            worker.join()
        return done

    def complete_all() -> None:
        with Client.connect(url) as w:
            for run_id in ids:
                started = time.time()
                sent[run_id] = started
                assert w.complete(run_id, claimed[run_id])
                took.append(time.time() - started)
                pause = 1 / rate - (time.time() - started)
                if pause > 0:
                    time.sleep(pause)

    done = asyncio.run(main())
    latency = [done[r] - sent[r] for r in ids]
    return [f"| waits at once | {runs:,} |",
            f"| server connections of the process's waits | {connections[0]} |",
            (f"| wake-up: complete sent -> wait returned, p50 / p99 | "
             f"{pct(latency, 0.5) * 1000:.1f} / {pct(latency, 0.99) * 1000:.1f} ms |"),
            f"| the complete's own round trip, p50 | {pct(took, 0.5) * 1000:.1f} ms |"]


def read_all(url: str, ids: list[int], results: Queue[tuple[list[float], int, float]]) -> None:
    """The readers (a process of their own): every run's stream at once."""
    lags: list[float] = []
    got = 0
    cpu = own_cpu()

    async def main() -> None:
        nonlocal got
        async with AsyncClient.connect(url) as client:
            async def one(run_id: int) -> None:
                nonlocal got
                async for chunk in client.stream(run_id):
                    lags.append(time.time() - chunk.chunk["t"])
                    got += 1
            await asyncio.gather(*(one(r) for r in ids))

    asyncio.run(main())
    results.put(([pct(lags, 0.5), pct(lags, 0.99)], got, own_cpu() - cpu))


def streams(url: str, runs: int, rate: float, seconds: float) -> list[str]:
    async def talker(ctx: AsyncRunContext) -> None:
        end = time.time() + seconds
        tick = 1 / rate
        while time.time() < end:
            await ctx.emit({"t": time.time()})
            await asyncio.sleep(tick)

    with Client.connect(url) as c:
        ids = [c.submit("bench", "bench.talk", priority=10).run_id for _ in range(runs)]
    spawn = multiprocessing.get_context("spawn")  # no fork of this process's threads
    results: Queue[tuple[list[float], int, float]] = spawn.Queue()
    readers = spawn.Process(target=read_all, args=(url, ids, results), name="readers")
    with psycopg.connect(url, autocommit=True) as probe:
        cpu0, own0 = server_cpu(probe), own_cpu()
        readers.start()
        pool = WorkerPool(url, {"bench.talk": talker}, [Slot((10,), runs)],
                          lease=timedelta(seconds=60), poll_interval=0.5, sweep_interval=None,
                          max_connections=4)
        pool.start()
        try:
            [lag, got, reader_cpu] = results.get(timeout=seconds * 20 + 120)
            # Before the pool's connections close: a backend's CPU goes with it.
            cpu1, own1 = server_cpu(probe), own_cpu()
        finally:
            pool.stop()
            pool.join()
            readers.join(30)
        [(stored, span)] = probe.execute(
            "SELECT count(*), extract(epoch FROM max(created_at) - min(created_at))"
            " FROM runq.run_output").fetchall()
    # A backend that connected meanwhile spent all its CPU in the window.
    server = sum(cpu1[p] - cpu0.get(p, 0.0) for p in cpu1)
    per = 1000 / max(stored, 1) * 1000  # ms per 1,000 chunks
    return [(f"| runs emitting at once, chunks a second each, seconds | {runs:,}, {rate:g}, "
             f"{seconds:g} |"),
            (f"| chunks stored a second, first to last (asked: {runs * rate:,.0f}) | "
             f"{stored / max(float(span), 1e-9):,.0f} |"),
            f"| chunks read (each run's, by one reader each) | {got:,} of {stored:,} |",
            (f"| reader lag: emit -> read, p50 / p99 | {lag[0] * 1000:.0f} / "
             f"{lag[1] * 1000:.0f} ms |"),
            (f"| CPU per 1,000 chunks: server / the pool's process / the readers' process | "
             f"{server * per:.0f} / {(own1 - own0) * per:.0f} / {reader_cpu * per:.0f} ms |")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=20.0, help="chunks a second per run")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each run emits")
    ap.add_argument("--complete-rate", type=float, default=200.0,
                    help="completes a second in the waits part")
    args = ap.parse_args()
    with scratch_database("runq_waiting") as (url, version):
        lines = ["| measure | value |", "| --- | ---: |"]
        lines += waits(url, args.runs, args.complete_rate)
        lines += streams(url, args.runs, args.rate, args.seconds)
    print(f"PostgreSQL {version}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
