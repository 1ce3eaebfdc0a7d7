"""The worker pool with ``async def`` handlers: many runs on a few
connections, one round trip for the heartbeats of all of them, completions
batched, fencing and cancellation stopping a handler that awaits. Real
server, real pools; the handlers are closures of each test (the pool runs
them on its event loop, in its thread "runq-pool"), and the test steers them
through threading.Events they poll with asyncio.sleep.

  test_async_lifecycle
      async handlers' runs succeed with the dict they return, their awaited
      begin_turn, checkpoint, begin_tool and end_tool land as events under
      epoch 1; one that raises fails its run with the exception's class as
      code; a sync handler in the same pool works too, in a thread of its own.
  test_many_runs_on_few_connections
      500 async handlers in one pool (Slot((10,), 500), max_connections=4)
      all run at once for two leases of 3 s; the pool's server connections
      (application_name runq-pool%) are never more than 6 (sampled); every
      lease stays live. With track_functions = 'pl' on the database,
      pg_stat_user_functions shows what the pool called: a few
      runq.heartbeat_many(...) (one per lease/3 for all 500), never
      runq.heartbeat; and when all 500 return together, runq.complete_many(...)
      and runq.complete together far fewer times than there are runs.
  test_lone_completion_is_not_delayed
      one run at a time whose handler returns at once: run.claimed to
      run.succeeded (event timestamps) under 0.5 s, with heartbeats 10 s
      apart and a poll interval of 5 s.
  test_full_slot_completes_and_claims_in_one_call
      40 quick runs through a slot of 2: every run succeeds once under
      epoch 1, never more than 2 handlers at once, and most runs (at least
      half) are claimed in the transaction that completed another
      (run.claimed and run.succeeded of two runs with one xmin): a lone
      completion of a full slot is runq.complete_and_claim.
  test_emitted_output_is_gathered_and_lands_before_the_end
      20 async handlers emit 40 chunks each, a millisecond apart, and a sync
      handler 10, then return: each run's output is its chunks in order
      (seq 1..n, epoch 1), all of it there when the run succeeded (flushed
      before the completion), sent in far fewer runq.emit calls than chunks
      (pg_stat_user_functions); a chunk that is not JSON raises TypeError in
      the handler, and an emit after the run was reclaimed raises RunStopped
      and never appears.
  test_locked_row_holds_up_no_other_completion
      ten runs return together while another session holds one run's row
      FOR UPDATE: the other nine succeed at once (the batch gives up at its
      lock timeout and completes them one by one), the locked one keeps its
      lease through two lease lengths and succeeds once the lock goes; each
      run's events are created, claimed, succeeded, nothing else.
  test_cancelled_completion_is_the_last_write
      a handler awaits its completion under asyncio.wait_for, gives up while
      another session holds the row, and returns something else: the
      completion it sent lands once the lock goes, and nothing follows it
      (the result is the first, no run.fenced).
  test_loops_pause_after_stop
      with no database to reach, the loops log their failures after stop()
      at the pace they did before it, not in a tight loop through the grace.
  test_stopped_run_stops_its_async_handler[reclaimed|cancelled]
      two running runs are reclaimed by another worker (epoch 2), or
      cancelled with runq.cancel: the pool's next heartbeat_many finds them
      no longer its own (one run.fenced each, or run.cancelled); a handler
      that polls sees ctx.stop_requested, and its next write raises
      RunStopped and writes nothing; a handler that ignores it (awaits a
      long sleep) has its task cancelled stop_grace after the heartbeat,
      not before. Nothing more under epoch 1; the freed slots claim again.
  test_async_budget_and_deadline_stop_awaiting_handlers
      a run with a budget takes turns (await ctx.begin_turn, then
      ctx.record_usage of each model call) until the gate stops it: RunStopped
      with reason budget_exhausted, the totals exact; a run with a timeout
      awaits past its deadline: the pool's heartbeat fails it, its next write
      raises RunStopped with reason deadline_exceeded, and the usage it
      records after that is still counted (False, no RunStopped).
  test_sigterm_async
      ``python -m runq.pool MODULE`` with async handlers gets SIGTERM with a
      short and a long run in flight (a file gate keeps the short one in
      flight until the signal is sent): the short one checkpoints and
      completes within grace, the long one is released (queued, attempts 0,
      tool call retryable, claimable at once as resumed) and the process
      exits 0.
  test_database_restart_mid_run_async
      a private cluster is restarted (pg_ctl restart -m fast) while 20 async
      runs pause between two checkpoints: heartbeats come back (later than
      the server's new start time), and every run then succeeds exactly
      once under its first epoch, both checkpoints under epoch 1, nothing
      fenced or requeued.
  test_async_pool_through_pgbouncer
      an async pool through PgBouncer in transaction mode (LISTEN hears
      nothing there: the slots poll) completes runs submitted after it has
      idled, and a run reclaimed under a live handler stops it: RunStopped at
      its next write, nothing more under epoch 1. Nothing logged an error.
  test_pool_ticks_due_schedules_into_runs_it_completes
      a pool with tick_interval=0.2 and a handler for the schedule's kind:
      a slot due before it starts (its first tick) and one made due while it
      runs (its timer) each become a run it claims and completes, the
      schedule's payload plus "slot" in each; the schedule's last_slot and
      last_run_id name the second, its next slot an hour on.
  test_pool_without_tick_interval_leaves_schedules_due
      tick_interval=None: a due schedule stays due and makes no run while the
      pool claims and completes a submitted run of its kind; a runq.tick from
      elsewhere then makes the run, which the pool completes.
  test_pool_ticks_schedules_again_at_once_after_a_full_batch
      150 due schedules, more than one tick takes (100), and a tick interval
      of 30 s: within 5 s of the start each has its one run.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgutil import Bouncer
from psycopg import sql
from runq import Client
from runq.pool import AsyncRunContext, RunContext, RunStopped, Slot, WorkerPool

TERMINAL = ("succeeded", "failed", "cancelled")


def wait_for(what: str, predicate: Callable[[], Any], timeout: float,
             state: Callable[[], Any] = lambda: "", every: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}\n{state()}")
        time.sleep(every)


async def until(event: threading.Event, timeout: float = 30.0) -> None:
    """Await a threading.Event the test sets, without blocking the loop."""
    deadline = time.monotonic() + timeout
    while not event.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never let the handler go on")
        await asyncio.sleep(0.02)


def value(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    """The first column of the query's one row."""
    row = conn.execute(query, params).fetchone()
    assert row is not None, query
    return row[0]


def events(conn: psycopg.Connection[Any], run_id: int) -> list[tuple[str, int]]:
    return [(t, e) for t, e in conn.execute(
        "SELECT type, epoch FROM runq.run_events(%s)", [run_id]).fetchall()]


def event_time(conn: psycopg.Connection[Any], run_id: int, kind: str) -> float:
    """When the run's (only) event of this type was logged, as time.time() has it."""
    [(at,)] = conn.execute("SELECT extract(epoch FROM created_at)::float8 FROM runq.run_events"
                           " WHERE run_id = %s AND type = %s", [run_id, kind]).fetchall()
    return float(at)


def statuses(conn: psycopg.Connection[Any], run_ids: list[int]) -> dict[int, str]:
    return dict(conn.execute("SELECT run_id, status FROM runq.runs WHERE run_id = ANY(%s)",
                             [run_ids]).fetchall())


def all_terminal(conn: psycopg.Connection[Any], run_ids: list[int]) -> dict[int, str] | None:
    found = statuses(conn, run_ids)
    return found if all(found.get(r) in TERMINAL for r in run_ids) else None


def submit(conn: psycopg.Connection[Any], kind: str, n: int = 1, priority: int = 10) -> list[int]:
    return [r for r, in conn.execute(
        "SELECT s.run_id FROM generate_series(1, %s) AS g,"
        " LATERAL runq.submit('async', %s, jsonb_build_object('n', g), priority => %s) AS s"
        " ORDER BY g", [n, kind, priority]).fetchall()]


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.fixture
def pools() -> Iterator[list[WorkerPool]]:
    """Pools a test started, stopped and joined at its end whatever happened."""
    started: list[WorkerPool] = []
    yield started
    for pool in started:
        pool.stop()
    for pool in started:
        pool.join()


def started(pools: list[WorkerPool], pool: WorkerPool) -> WorkerPool:
    pools.append(pool)
    pool.start()
    return pool


# -- 1. the lifecycle ---------------------------------------------------------------------


def test_async_lifecycle(db_url: str, conn: psycopg.Connection[Any], pools: list[WorkerPool],
                         caplog: pytest.LogCaptureFixture) -> None:
    async def agent(ctx: AsyncRunContext) -> dict[str, Any]:
        n = ctx.run.payload["n"]
        await ctx.begin_turn()
        await ctx.checkpoint({"step": 1, "n": n})
        await ctx.begin_tool("c1", "search", "read_only", {"q": n})
        await asyncio.sleep(0.01)
        await ctx.end_tool("c1", {"hits": n})
        return {"n": n, "epoch": ctx.epoch, "thread": threading.current_thread().name}

    async def explodes(ctx: AsyncRunContext) -> None:
        await ctx.begin_turn()
        raise LookupError("nothing by that name")

    def blocking(ctx: RunContext) -> dict[str, Any]:
        ctx.checkpoint({"sync": True})
        time.sleep(0.05)
        return {"thread": threading.current_thread().name}

    pool = started(pools, WorkerPool(
        db_url, {"agent": agent, "explodes": explodes, "blocking": blocking}, [Slot((10,), 4)],
        poll_interval=0.1, sweep_interval=None))
    agents = submit(conn, "agent", 3)
    [boom] = submit(conn, "explodes")
    [sync] = submit(conn, "blocking")
    done = wait_for("every run to end", lambda: all_terminal(conn, [*agents, boom, sync]), 10)
    assert done == {**{r: "succeeded" for r in agents}, boom: "failed", sync: "succeeded"}

    for n, run in enumerate(agents, 1):
        result = conn.execute("SELECT result FROM runq.runs WHERE run_id = %s", [run]).fetchone()
        assert result == ({"n": n, "epoch": 1, "thread": "runq-pool"},), result  # on the loop
        assert events(conn, run) == [
            ("run.created", 0), ("run.claimed", 1), ("run.turn_started", 1),
            ("run.checkpointed", 1), ("run.tool_started", 1), ("run.tool_finished", 1),
            ("run.succeeded", 1)], events(conn, run)
        assert conn.execute("SELECT call_id, status, epoch, outcome FROM runq.tool_calls(%s)",
                            [run]).fetchall() == [("c1", "finished", 1, {"hits": n})]
        assert conn.execute("SELECT epoch, state FROM runq.checkpoints WHERE run_id = %s",
                            [run]).fetchall() == [(1, {"step": 1, "n": n})]

    failure = conn.execute("SELECT failure FROM runq.runs WHERE run_id = %s", [boom]).fetchone()
    assert failure is not None and failure[0]["code"] == "LookupError", failure
    assert "nothing by that name" in failure[0]["message"], failure
    assert [t for t, _ in events(conn, boom)][-2:] == ["run.turn_started", "run.failed"]

    result = conn.execute("SELECT result FROM runq.runs WHERE run_id = %s", [sync]).fetchone()
    assert result == ({"thread": f"runq-run-{sync}"},), result  # a thread of its own
    assert ("run.checkpointed", 1) in events(conn, sync)
    assert not pool.inflight()
    assert errors_logged(caplog) == []


# -- 2. many runs on few connections ---------------------------------------------------------


def function_calls(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return dict(conn.execute("SELECT funcname, calls FROM pg_stat_user_functions"
                             " WHERE schemaname = 'runq'").fetchall())


def test_many_runs_on_few_connections(db_url: str, conn: psycopg.Connection[Any],
                                      connect: Callable[[], psycopg.Connection[Any]],
                                      pools: list[WorkerPool],
                                      caplog: pytest.LogCaptureFixture) -> None:
    runs_wanted, lease, max_connections = 500, 3.0, 4
    # Every session from now on counts its PL/pgSQL calls (the pool's are all
    # new; this connection's submits are not counted).
    conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(
        sql.Identifier(conn.info.dbname)))
    running = 0
    peak = 0
    release = threading.Event()

    async def sleepy(ctx: AsyncRunContext) -> dict[str, int]:
        nonlocal running, peak
        running += 1  # on the pool's one loop: no lock needed
        peak = max(peak, running)
        try:
            await until(release, timeout=60)
        finally:
            running -= 1
        return {"n": ctx.run.payload["n"]}

    runs = submit(conn, "sleepy", runs_wanted)
    seen_connections: list[int] = []
    sampling = threading.Event()
    sampler_conn = connect()

    def sample() -> None:
        while not sampling.is_set():
            row = sampler_conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name LIKE 'runq-pool%'").fetchone()
            seen_connections.append(int(row[0]) if row else -1)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, name="test-sampler", daemon=True)
    sampler.start()
    began = time.monotonic()
    try:
        pool = started(pools, WorkerPool(db_url, {"sleepy": sleepy}, [Slot((10,), runs_wanted)],
                                         lease=timedelta(seconds=lease), poll_interval=0.2,
                                         sweep_interval=None, max_connections=max_connections))
        wait_for("all 500 handlers to run at once", lambda: peak == runs_wanted, 15,
                 lambda: f"peak {peak}, running {running}")
        all_in = time.monotonic()
        assert len(pool.inflight()) == runs_wanted
        assert statuses(conn, runs) == {r: "running" for r in runs}
        # Two leases: without a heartbeat for each run every lease would lapse.
        time.sleep(2 * lease)
        lapsed = conn.execute(
            "SELECT count(*) FILTER (WHERE lease_expires_at <= now()),"
            "       count(*) FILTER (WHERE heartbeat_at < now() - %s)"
            "  FROM runq.runs WHERE run_id = ANY(%s)",
            [timedelta(seconds=lease / 2), runs]).fetchone()
        assert lapsed == (0, 0), f"(lapsed leases, stale heartbeats) = {lapsed}"
        assert peak == running == runs_wanted
        release.set()
        done = wait_for("all 500 runs to end", lambda: all_terminal(conn, runs), 15)
        finished = time.monotonic()
        assert set(done.values()) == {"succeeded"}, done
    finally:
        release.set()
        sampling.set()
        sampler.join()
    results = dict(conn.execute("SELECT run_id, (result->>'n')::int FROM runq.runs"
                                " WHERE run_id = ANY(%s)", [runs]).fetchall())
    assert results == {r: n for n, r in enumerate(runs, 1)}
    assert seen_connections and max(seen_connections) <= max_connections + 2, (
        f"the pool held {max(seen_connections)} server connections")

    # The counts of the pool's sessions reach the statistics when they end.
    pool.stop()
    pool.join()
    wait_for("the pool's sessions to end", lambda: value(
        sampler_conn, "SELECT count(*) = 0 FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name LIKE 'runq-pool%'"), 5)
    calls: dict[str, int] = {}

    def settled() -> bool:
        nonlocal calls
        before, calls = calls, function_calls(conn)
        return bool(calls) and calls == before

    wait_for("the pool's function statistics", settled, 5, lambda: calls, every=0.3)
    beats = calls.get("heartbeat_many", 0)
    completions = calls.get("complete_many", 0) + calls.get("complete", 0)
    interval = lease / 3
    print(f"\n{runs_wanted} async runs: peak {peak} at once {all_in - began:.1f}s after start,"
          f" at most {max(seen_connections)} server connections; heartbeat_many x{beats},"
          f" heartbeat x{calls.get('heartbeat', 0)} in {finished - began:.1f}s;"
          f" complete_many x{calls.get('complete_many', 0)},"
          f" complete x{calls.get('complete', 0)}; claim x{calls.get('claim', 0)}")
    assert calls.get("heartbeat", 0) == 0, calls
    # One per interval for all runs (and the runs in flight only then).
    assert 2 * lease / interval - 1 <= beats <= (finished - began) / interval + 2, calls
    assert calls.get("complete_many", 0) >= 1, calls
    assert completions <= runs_wanted / 10, calls
    assert errors_logged(caplog) == []


# -- 3. a lone completion ----------------------------------------------------------------------


def test_lone_completion_is_not_delayed(db_url: str, conn: psycopg.Connection[Any],
                                        pools: list[WorkerPool]) -> None:
    async def at_once(ctx: AsyncRunContext) -> dict[str, bool]:
        return {"ok": True}

    # Heartbeats 10 s apart, polls 5 s apart: neither may pace a completion.
    started(pools, WorkerPool(db_url, {"at_once": at_once}, [Slot((10,), 4)],
                              lease=timedelta(seconds=30), poll_interval=5.0,
                              sweep_interval=None))
    # A submit wakes the idle slot through LISTEN, so that the test is quick.
    wait_for("the pool to listen", lambda: value(
        conn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = 'runq-pool-listen' AND query = 'LISTEN runq'"), 5)
    took = []
    for _ in range(3):
        [run] = submit(conn, "at_once")
        wait_for("the run to end", lambda: all_terminal(conn, [run]), 10)  # noqa: B023
        assert statuses(conn, [run]) == {run: "succeeded"}
        took.append(event_time(conn, run, "run.succeeded") - event_time(conn, run, "run.claimed"))
    print(f"\nclaimed to succeeded: {', '.join(f'{t * 1000:.1f} ms' for t in took)}")
    assert max(took) < 0.5, took


def test_full_slot_completes_and_claims_in_one_call(db_url: str, conn: psycopg.Connection[Any],
                                                    pools: list[WorkerPool]) -> None:
    running = peak = 0

    async def quick(ctx: AsyncRunContext) -> dict[str, Any]:
        nonlocal running, peak
        running += 1  # on the pool's one loop: no lock needed
        peak = max(peak, running)
        await asyncio.sleep(0.005 * (ctx.run.payload["n"] % 4))  # not in step
        running -= 1
        return {"n": ctx.run.payload["n"]}

    runs = submit(conn, "quick", 40)
    started(pools, WorkerPool(db_url, {"quick": quick}, [Slot((10,), 2)],
                              lease=timedelta(seconds=30), poll_interval=5.0,
                              sweep_interval=None))
    wait_for("every run to end", lambda: all_terminal(conn, runs), 30)
    assert set(statuses(conn, runs).values()) == {"succeeded"}
    for run in runs:
        assert events(conn, run) == [("run.created", 0), ("run.claimed", 1),
                                     ("run.succeeded", 1)], run
    assert peak <= 2, peak
    # The claim and the completion of another run in one transaction.
    handed_on = value(conn, """
        SELECT count(*) FROM runq.run_events AS c
          JOIN runq.run_events AS s ON s.xmin = c.xmin AND s.run_id <> c.run_id
         WHERE c.run_id = ANY (%(runs)s) AND c.type = 'run.claimed'
           AND s.run_id = ANY (%(runs)s) AND s.type = 'run.succeeded'""", {"runs": runs})
    print(f"\nclaimed in the completion of another: {handed_on} of {len(runs)}")
    assert handed_on >= len(runs) // 2, handed_on


def test_emitted_output_is_gathered_and_lands_before_the_end(
        db_url: str, conn: psycopg.Connection[Any], pools: list[WorkerPool]) -> None:
    conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(
        sql.Identifier(conn.info.dbname)))
    refused: list[str] = []

    async def talker(ctx: AsyncRunContext) -> dict[str, bool]:
        for i in range(40):
            await ctx.emit({"i": i})
            await asyncio.sleep(0.001)
        try:
            await ctx.emit({1, 2})
        except TypeError:
            refused.append("not json")
        return {"ok": True}

    def sync_talker(ctx: RunContext) -> None:
        for i in range(10):
            ctx.emit(i)

    async def overtaken(ctx: AsyncRunContext) -> None:
        await ctx.emit("mine")
        with psycopg.connect(db_url, autocommit=True) as other:
            # Sent by the gathering loop meanwhile (every 10 ms; later on a
            # loaded machine): the run is taken only once it has landed.
            for _ in range(500):
                if value(other, "SELECT count(*) FROM runq.read_output(%s)", [ctx.run_id]):
                    break
                await asyncio.sleep(0.02)
            # another worker takes the run
            other.execute("UPDATE runq.runs SET lease_expires_at = now() - interval '1 s'"
                          " WHERE run_id = %s", [ctx.run_id])
            other.execute("SELECT runq.sweep()")
            other.execute("SELECT runq.claim(ARRAY[10], kinds => ARRAY['overtaken'])")
        await ctx.emit("stale")
        try:
            await ctx.complete({"late": True})
        except RunStopped:
            refused.append("stopped")

    talkers = submit(conn, "talker", 20)
    [quiet] = submit(conn, "sync_talker")
    [taken] = submit(conn, "overtaken")
    started(pools, WorkerPool(db_url, {"talker": talker, "sync_talker": sync_talker,
                                       "overtaken": overtaken}, [Slot((10,), 30)],
                              lease=timedelta(seconds=30), poll_interval=0.2,
                              sweep_interval=None))
    wait_for("the runs to end", lambda: all_terminal(conn, [*talkers, quiet]), 30)
    wait_for("the overtaken run's handler to be refused", lambda: "stopped" in refused, 30)
    assert refused.count("not json") == 20
    with Client(conn) as client:
        for run in talkers:
            out = client.read_output(run)
            assert [(o.seq, o.epoch, o.chunk) for o in out] == [
                (i + 1, 1, {"i": i}) for i in range(40)]
        assert [o.chunk for o in client.read_output(quiet)] == list(range(10))
        assert [(o.epoch, o.chunk) for o in client.read_output(taken)] == [(1, "mine")]
    pools[0].stop()
    pools[0].join()
    calls = value(conn, "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
                        " WHERE schemaname = 'runq' AND funcname = 'emit'")
    print(f"\nrunq.emit calls for {20 * 40 + 10 + 2} chunks: {calls}")
    assert 0 < calls < (20 * 40) / 3, calls


def test_locked_row_holds_up_no_other_completion(db_url: str, conn: psycopg.Connection[Any],
                                                 connect: Callable[[], psycopg.Connection[Any]],
                                                 pools: list[WorkerPool]) -> None:
    lease = 3.0
    go = threading.Event()

    async def waits(ctx: AsyncRunContext) -> dict[str, int]:
        await until(go)
        return {"n": ctx.run.payload["n"]}

    runs = submit(conn, "waits", 10)
    pool = started(pools, WorkerPool(db_url, {"waits": waits}, [Slot((10,), 10)],
                                     lease=timedelta(seconds=lease), poll_interval=0.1,
                                     sweep_interval=0.5))
    wait_for("every run to be running", lambda: set(runs) <= set(pool.inflight()), 10)
    locker = connect()
    locker.execute("BEGIN")
    locker.execute("SELECT FROM runq.runs WHERE run_id = %s FOR UPDATE", [runs[0]])
    try:
        go.set()
        # The other nine complete at once, and nothing lapses meanwhile.
        wait_for("the unlocked runs to succeed", lambda: set(statuses(conn, runs[1:]).values())
                 == {"succeeded"}, 2 * lease, state=lambda: statuses(conn, runs))
        time.sleep(2 * lease)  # the locked one: its lease must outlive the lock
        assert statuses(conn, runs[:1]) == {runs[0]: "running"}
    finally:
        locker.execute("COMMIT")
    wait_for("the locked run to succeed", lambda: all_terminal(conn, runs), 2 * lease)
    assert set(statuses(conn, runs).values()) == {"succeeded"}
    for run in runs:
        kinds = [t for t, _ in events(conn, run)]
        assert kinds == ["run.created", "run.claimed", "run.succeeded"], (run, events(conn, run))


def test_cancelled_completion_is_the_last_write(db_url: str, conn: psycopg.Connection[Any],
                                                connect: Callable[[], psycopg.Connection[Any]],
                                                pools: list[WorkerPool]) -> None:
    # A handler gives up waiting for its completion and returns something
    # else: the completion it sent still lands, and nothing follows it.
    timed_out, go = threading.Event(), threading.Event()

    async def impatient(ctx: AsyncRunContext) -> dict[str, int]:
        await until(go)
        try:
            await asyncio.wait_for(ctx.complete({"first": 1}), 0.2)
        except asyncio.TimeoutError:
            timed_out.set()
        return {"second": 2}

    [run] = submit(conn, "impatient")
    locker = connect()
    locker.execute("BEGIN")
    started(pools, WorkerPool(db_url, {"impatient": impatient}, [Slot((10,), 1)],
                              lease=timedelta(seconds=3), poll_interval=0.1,
                              sweep_interval=None))
    wait_for("the run to be claimed", lambda: statuses(conn, [run]) == {run: "running"}, 10)
    locker.execute("SELECT FROM runq.runs WHERE run_id = %s FOR UPDATE", [run])
    try:
        go.set()
        wait_for("the handler to give up", timed_out.is_set, 5)
        time.sleep(0.5)
    finally:
        locker.execute("COMMIT")
    wait_for("the run to end", lambda: all_terminal(conn, [run]), 5)
    time.sleep(0.5)  # a second completion would land by now
    assert value(conn, "SELECT result FROM runq.runs WHERE run_id = %s", [run]) == {"first": 1}
    assert [t for t, _ in events(conn, run)] == ["run.created", "run.claimed", "run.succeeded"]


def test_loops_pause_after_stop(caplog: pytest.LogCaptureFixture) -> None:
    # A database that is not there: every loop fails, and goes on failing
    # through the grace after stop(), but at the pace it did before.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there

    async def never(ctx: AsyncRunContext) -> None:
        raise AssertionError("nothing can be claimed")

    caplog.set_level(logging.WARNING, logger="runq.pool")
    pool = WorkerPool(f"postgresql://nobody@127.0.0.1:{port}/none", {"never": never},
                      [Slot((10,), 1)], poll_interval=0.2, grace=2.0)
    pool.start()
    time.sleep(2.0)
    before = len(caplog.records)
    pool.stop()
    pool.join()
    after = len(caplog.records) - before
    print(f"\nrecords logged: {before} in the 2 s before stop(), {after} in the grace after it")
    assert after <= 2 * before + 10, (before, after)


# -- 4, 5. a run stopped under a live handler ----------------------------------------------


def take_over(conn: psycopg.Connection[Any], runs: list[int]) -> None:
    """Another worker takes the runs: expired, swept, claimed at epoch 2, in
    one transaction, so the pool's heartbeat meets either its own run or
    the other worker's."""
    with conn.transaction():
        conn.execute("UPDATE runq.runs SET lease_expires_at = now() - interval '1 s'"
                     " WHERE run_id = ANY(%s)", [runs])
        swept = conn.execute("SELECT run_id, action FROM runq.sweep() ORDER BY run_id").fetchall()
        assert swept == [(r, "requeued") for r in sorted(runs)], swept
        conn.execute("UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = ANY(%s)", [runs])
        claimed = conn.execute("SELECT run_id, epoch FROM runq.claim(ARRAY[10], 'other',"
                               " max_runs => %s) ORDER BY run_id", [len(runs)]).fetchall()
        assert claimed == [(r, 2) for r in sorted(runs)], claimed


@pytest.mark.parametrize("how", ["reclaimed", "cancelled"])
def test_stopped_run_stops_its_async_handler(db_url: str, conn: psycopg.Connection[Any],
                                             pools: list[WorkerPool], how: str) -> None:
    lease, stop_grace = 1.5, 1.0  # heartbeats every 0.5 s
    go_on = threading.Event()
    writer_saw: list[Any] = []
    sleeper_saw: list[Any] = []

    async def writer(ctx: AsyncRunContext) -> None:
        await ctx.begin_turn()
        await ctx.checkpoint({"step": 1})
        await until(go_on)
        deadline = time.monotonic() + 3 * lease
        while not ctx.stop_requested and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        writer_saw.append(("stop_requested", ctx.stop_requested))
        try:
            await ctx.checkpoint({"step": 2})
        except RunStopped:
            writer_saw.append("RunStopped")
            raise
        writer_saw.append("written")

    async def sleeper(ctx: AsyncRunContext) -> None:
        await ctx.begin_turn()
        try:
            await asyncio.sleep(60)  # writes nothing, so never hears of the stop
        except asyncio.CancelledError:
            sleeper_saw.append(("CancelledError", time.time(), ctx.stop_requested))
            raise
        sleeper_saw.append("slept")

    async def quick(ctx: AsyncRunContext) -> dict[str, str]:
        return {"by": "the freed slot"}

    pool = started(pools, WorkerPool(
        db_url, {"writer": writer, "sleeper": sleeper, "quick": quick}, [Slot((10,), 2)],
        lease=timedelta(seconds=lease), poll_interval=0.1, sweep_interval=None,
        stop_grace=stop_grace))
    [w] = submit(conn, "writer")
    [s] = submit(conn, "sleeper")
    wait_for("both handlers to begin their turns", lambda: ("run.checkpointed", 1) in events(
        conn, w) and ("run.turn_started", 1) in events(conn, s), 5,
        lambda: (events(conn, w), events(conn, s)))

    if how == "reclaimed":
        take_over(conn, [w, s])
        stopped_by = "run.fenced"
    else:
        assert conn.execute("SELECT runq.cancel(%s), runq.cancel(%s)", [w, s]).fetchone() == (
            "cancel_requested", "cancel_requested")
        stopped_by = "run.cancelled"
    go_on.set()
    wait_for("the writer to meet RunStopped and the sleeper to be cancelled",
             lambda: len(writer_saw) == 2 and sleeper_saw, 3 * lease + stop_grace + 2,
             lambda: (writer_saw, sleeper_saw, events(conn, w), events(conn, s)))
    assert writer_saw == [("stop_requested", True), "RunStopped"], writer_saw
    [(what, cancelled_at, stop_requested)] = sleeper_saw
    assert (what, stop_requested) == ("CancelledError", True), sleeper_saw
    # The pool's heartbeat wrote the stop; the sleeper's task went stop_grace later.
    after = cancelled_at - event_time(conn, s, stopped_by)
    print(f"\n{how}: the sleeper was cancelled {after:.2f}s after its {stopped_by}"
          f" (stop_grace {stop_grace}s)")
    assert stop_grace - 0.05 <= after <= stop_grace + 0.5, after
    wait_for("the pool to let both runs go", lambda: not pool.inflight(), 2)

    for run in (w, s):
        log = events(conn, run)
        if how == "reclaimed":
            # at epoch 1 after the other worker's claim: the pool's one run.fenced only
            later = log[log.index(("run.claimed", 2)) + 1:]
            assert later == [("run.fenced", 1)], log
            assert conn.execute("SELECT runq.complete(%s, 2, '{\"by\": \"other\"}')",
                                [run]).fetchone() == (True,)
        else:
            assert log[-1] == ("run.cancelled", 1), log
            assert statuses(conn, [run]) == {run: "cancelled"}
    assert conn.execute("SELECT count(*) FROM runq.checkpoints WHERE run_id = %s",
                        [w]).fetchone() == (1,), "the stopped writer's checkpoint landed"
    assert [t for t, _ in events(conn, w)].count("run.checkpointed") == 1, events(conn, w)

    # Both slots are free again.
    quicks = submit(conn, "quick", 2)
    assert wait_for("the freed slots to claim", lambda: all_terminal(conn, quicks), 5) == {
        q: "succeeded" for q in quicks}


def test_async_budget_and_deadline_stop_awaiting_handlers(
        db_url: str, conn: psycopg.Connection[Any], pools: list[WorkerPool],
        caplog: pytest.LogCaptureFixture) -> None:
    metered_saw: list[Any] = []
    late_saw: list[Any] = []

    async def metered(ctx: AsyncRunContext) -> None:
        metered_saw.append(ctx.budget)
        try:
            while True:
                await ctx.begin_turn()
                await asyncio.sleep(0.01)  # the model call
                metered_saw.append(await ctx.record_usage({"cost_usd": 0.1}))
        except RunStopped as stopped:
            metered_saw.append(stopped.reason)
            raise

    async def late(ctx: AsyncRunContext) -> None:
        assert ctx.deadline is not None
        await ctx.begin_turn()
        give_up = time.monotonic() + 10
        while not ctx.stop_requested and time.monotonic() < give_up:
            await asyncio.sleep(0.02)
        late_saw.append(datetime.now(timezone.utc) >= ctx.deadline)
        late_saw.append(await ctx.record_usage({"cost_usd": 0.1}))
        try:
            await ctx.checkpoint({"late": True})
        except RunStopped as stopped:
            late_saw.append(stopped.reason)

    with Client.connect(db_url) as client:
        m = client.submit("t", "metered", budget={"cost_usd": Decimal("0.3")}).run_id
        lt = client.submit("t", "late", timeout=timedelta(seconds=1)).run_id
        started(pools, WorkerPool(db_url, {"metered": metered, "late": late}, [Slot((10,), 2)],
                                  lease=timedelta(milliseconds=600), poll_interval=0.1,
                                  sweep_interval=None))
        wait_for("both handlers to stop", lambda: len(metered_saw) == 5 and len(late_saw) == 3,
                 10, lambda: (metered_saw, late_saw))
        runs = {r: client.get_run(r) for r in (m, lt)}
    # three turns of 0.1: the fourth begin_turn finds 0.3 >= 0.3
    assert metered_saw == [{"cost_usd": Decimal("0.3")}, True, True, True,
                           "budget_exhausted"], metered_saw
    assert runs[m].usage == {"cost_usd": Decimal("0.3")}
    assert runs[m].failure is not None and runs[m].failure["code"] == "budget_exhausted"
    assert late_saw == [True, False, "deadline_exceeded"], late_saw
    assert runs[lt].failure is not None and runs[lt].failure["code"] == "deadline_exceeded"
    assert runs[lt].usage == {"cost_usd": Decimal("0.1")}
    assert ("run.checkpointed", 1) not in events(conn, lt)
    assert errors_logged(caplog) == []


# -- 6. SIGTERM ----------------------------------------------------------------------------


HANDLERS = textwrap.dedent("""
    import asyncio, pathlib
    async def short(ctx):
        # in flight until the test has sent SIGTERM, however slowly the pool started
        gate = pathlib.Path("sigterm-sent")
        while not gate.exists():
            await asyncio.sleep(0.02)
        await ctx.checkpoint({"after": "sigterm"})
        return {"done": "short"}
    async def long(ctx):
        await ctx.begin_tool("c1", "search", "read_only")
        await asyncio.sleep(60)
    HANDLERS = {"short": short, "long": long}
""")


def test_sigterm_async(db_url: str, conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    (tmp_path / "handlers_async_sigterm.py").write_text(HANDLERS)
    [short] = submit(conn, "short")
    [long] = submit(conn, "long")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "runq.pool", "handlers_async_sigterm", "--database-url", db_url,
         "--slot", "10:2", "--grace", "2", "--lease", "30", "--sweep-every", "0"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for("both runs to run, the long one in its tool call", lambda: statuses(
            conn, [short, long]) == {short: "running", long: "running"} and value(
            conn, "SELECT count(*) FROM runq.tool_calls(%s)", [long]), 30)
        worker.send_signal(signal.SIGTERM)
        (tmp_path / "sigterm-sent").touch()
        out, _ = worker.communicate(timeout=20)
    finally:
        worker.kill()
    assert worker.returncode == 0, out
    assert statuses(conn, [short]) == {short: "succeeded"}, out
    assert conn.execute("SELECT result FROM runq.runs WHERE run_id = %s",
                        [short]).fetchone() == ({"done": "short"},)
    assert ("run.checkpointed", 1) in events(conn, short), "no write during the grace period"
    # released: queued again at once, the attempt given back, the tool call retryable
    assert conn.execute("SELECT status, attempts, scheduled_for FROM runq.get_run(%s)",
                        [long]).fetchone() == ("queued", 0, None), out
    assert [t for t, in conn.execute("SELECT status FROM runq.tool_calls(%s)",
                                     [long]).fetchall()] == ["retryable"]
    with Client.connect(db_url) as client:
        claimed = client.claim([10], worker_id="next-pool")
    assert [(c.run_id, c.epoch, c.resumed) for c in claimed] == [(long, 2, True)]


# -- 7. a database restart ----------------------------------------------------------------


def test_database_restart_mid_run_async(private_cluster: tuple[str, Callable[[], None]],
                                        pools: list[WorkerPool],
                                        caplog: pytest.LogCaptureFixture) -> None:
    url, restart = private_cluster
    lease, count = 3.0, 20
    go_on = threading.Event()

    async def pauses(ctx: AsyncRunContext) -> dict[str, int]:
        await ctx.checkpoint({"step": 1})
        await until(go_on)
        await ctx.checkpoint({"step": 2})
        return {"epoch": ctx.epoch}

    conn = psycopg.connect(url, autocommit=True)
    try:
        # No sweeper: every run must get through on its first lease.
        pool = started(pools, WorkerPool(url, {"pauses": pauses}, [Slot((10,), count)],
                                         lease=timedelta(seconds=lease), poll_interval=0.1,
                                         sweep_interval=None))
        runs = submit(conn, "pauses", count)
        wait_for("every run to checkpoint and pause", lambda: value(
            conn, "SELECT count(DISTINCT run_id) = %s FROM runq.checkpoints"
            " WHERE run_id = ANY(%s)", [count, runs]) and set(runs) <= set(pool.inflight()), 10)

        restart()
        conn.close()
        conn = psycopg.connect(url, autocommit=True)
        wait_for("heartbeats of every paused run after the restart", lambda: value(
            conn, "SELECT bool_and(status = 'running' AND lease_expires_at > now()"
            " AND heartbeat_at > pg_postmaster_start_time())"
            " FROM runq.runs WHERE run_id = ANY(%s)", [runs]),
            2 * lease)
        assert any("lost the database" in r.getMessage() for r in caplog.records), (
            "the pool never noticed the restart")

        go_on.set()  # each handler checkpoints again, then returns
        done = wait_for("every run to end", lambda: all_terminal(conn, runs), 10,
                        lambda: statuses(conn, runs))
        assert set(done.values()) == {"succeeded"}, done
        for run in runs:
            log = events(conn, run)
            assert [t for t, _ in log].count("run.succeeded") == 1, (run, log)
            assert {e for _, e in log} == {0, 1} and log[-1] == ("run.succeeded", 1), (run, log)
            assert not {"run.fenced", "run.requeued"} & {t for t, _ in log}, (run, log)
            assert conn.execute("SELECT result FROM runq.runs WHERE run_id = %s",
                                [run]).fetchone() == ({"epoch": 1},)
            assert conn.execute("SELECT epoch, state FROM runq.checkpoints WHERE run_id = %s"
                                " ORDER BY seq", [run]).fetchall() == [
                (1, {"step": 1}), (1, {"step": 2})], run
        assert not pool.inflight()
        assert errors_logged(caplog) == []
    finally:
        go_on.set()
        conn.close()


# -- 8. PgBouncer ------------------------------------------------------------------------


def test_async_pool_through_pgbouncer(bouncer: Bouncer, conn: psycopg.Connection[Any],
                                      pools: list[WorkerPool],
                                      caplog: pytest.LogCaptureFixture) -> None:
    poll, lease = 0.2, 1.5
    go_on = threading.Event()
    held_saw: list[Any] = []

    async def echo(ctx: AsyncRunContext) -> dict[str, int]:
        n = ctx.run.payload["n"]
        await ctx.begin_turn()
        await ctx.checkpoint({"n": n})
        await ctx.begin_tool("c1", "echo", "idempotent", {"n": n})
        await ctx.end_tool("c1", {"echo": n})
        return {"n": n}

    async def held(ctx: AsyncRunContext) -> None:
        await ctx.begin_turn()
        await until(go_on)
        deadline = time.monotonic() + 3 * lease
        while not ctx.stop_requested and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        held_saw.append(ctx.stop_requested)
        try:
            await ctx.checkpoint({"late": True})
        except RunStopped:
            held_saw.append("RunStopped")
            raise
        held_saw.append("written")

    pool = started(pools, WorkerPool(bouncer.url, {"echo": echo, "held": held},
                                     [Slot((10,), 4)], lease=timedelta(seconds=lease),
                                     poll_interval=poll, sweep_interval=None, max_connections=2))
    [h] = submit(conn, "held")
    wait_for("the held run's turn", lambda: ("run.turn_started", 1) in events(conn, h), 10)
    time.sleep(10 * poll)  # the slots poll past psycopg's prepare threshold
    runs = submit(conn, "echo", 12)
    done = wait_for("the echo runs to end", lambda: all_terminal(conn, runs), 20,
                    lambda: f"{statuses(conn, runs)}\n{bouncer.log_tail()}")
    assert set(done.values()) == {"succeeded"}, bouncer.log_tail()
    assert dict(conn.execute("SELECT run_id, (result->>'n')::int FROM runq.runs"
                             " WHERE run_id = ANY(%s)", [runs]).fetchall()) == {
        r: n for n, r in enumerate(runs, 1)}
    assert [t for t, _ in events(conn, runs[0])] == [
        "run.created", "run.claimed", "run.turn_started", "run.checkpointed",
        "run.tool_started", "run.tool_finished", "run.succeeded"]

    take_over(conn, [h])
    go_on.set()
    wait_for("the held handler to write once more", lambda: len(held_saw) == 2, 3 * lease + 2,
             lambda: (held_saw, events(conn, h), bouncer.log_tail()))
    assert held_saw == [True, "RunStopped"], held_saw
    wait_for("the pool to let the run go", lambda: h not in pool.inflight(), 2)
    log = events(conn, h)
    assert log[log.index(("run.claimed", 2)) + 1:] == [("run.fenced", 1)], log
    assert conn.execute("SELECT count(*) FROM runq.checkpoints WHERE run_id = %s",
                        [h]).fetchone() == (0,)
    assert errors_logged(caplog) == [], bouncer.log_tail()


# -- 9. schedules --------------------------------------------------------------------------


def make_due(conn: psycopg.Connection[Any], where: str = "true") -> None:
    """The schedules' next slot a second ago, each an every schedule's first."""
    conn.execute("UPDATE runq.schedule_settings SET next_slot = now() - interval '1 second',"
                 " created_at = now() - interval '1 second' - every WHERE " + where)


def schedule_runs(conn: psycopg.Connection[Any], name: str) -> dict[int, str]:
    return dict(conn.execute("SELECT run_id, status FROM runq.runs WHERE schedule = %s"
                             " ORDER BY run_id", [name]).fetchall())


def succeeded(conn: psycopg.Connection[Any], name: str, n: int) -> list[int] | None:
    """The schedule's runs once there are n and all n succeeded."""
    found = schedule_runs(conn, name)
    return list(found) if len(found) == n and set(found.values()) == {"succeeded"} else None


def test_pool_ticks_due_schedules_into_runs_it_completes(
        db_url: str, conn: psycopg.Connection[Any], pools: list[WorkerPool],
        caplog: pytest.LogCaptureFixture) -> None:
    async def ping(ctx: AsyncRunContext) -> dict[str, Any]:
        return {"got": ctx.run.payload}

    conn.execute("SELECT runq.create_schedule('ping', 'acme', 'ping', every => interval '1 hour',"
                 " payload => '{\"a\": 1}')")
    make_due(conn)  # due before the pool starts: its first tick, at once, takes it
    started(pools, WorkerPool(db_url, {"ping": ping}, [Slot((10,), 2)], poll_interval=0.2,
                              sweep_interval=None, tick_interval=0.2))
    [first] = wait_for("the schedule's run to succeed", lambda: succeeded(conn, "ping", 1), 5,
                       lambda: schedule_runs(conn, "ping"))
    make_due(conn)  # and again while the pool runs: its timer ticks
    runs = wait_for("a second run to succeed", lambda: succeeded(conn, "ping", 2), 5,
                    lambda: schedule_runs(conn, "ping"))
    assert runs[0] == first
    slots: list[datetime] = []
    for run in runs:
        row = conn.execute("SELECT payload, result, (payload->>'slot')::timestamptz"
                           "  FROM runq.runs WHERE run_id = %s", [run]).fetchone()
        assert row is not None
        payload, result, slot = row
        assert payload == {"a": 1, "slot": payload["slot"]} and result == {"got": payload}
        assert events(conn, run) == [("run.created", 0), ("run.claimed", 1),
                                     ("run.succeeded", 1)], events(conn, run)
        slots.append(slot)
    assert slots[0] < slots[1]
    assert conn.execute(
        "SELECT last_slot, last_run_id, next_slot > now() + interval '59 minutes'"
        "  FROM runq.schedules WHERE name = 'ping'").fetchone() == (slots[1], runs[1], True)
    assert errors_logged(caplog) == []


def test_pool_without_tick_interval_leaves_schedules_due(
        db_url: str, conn: psycopg.Connection[Any], pools: list[WorkerPool]) -> None:
    async def ping(ctx: AsyncRunContext) -> dict[str, Any]:
        return {"got": ctx.run.payload}

    conn.execute("SELECT runq.create_schedule('ping', 'acme', 'ping', every => interval '1 hour')")
    make_due(conn)
    started(pools, WorkerPool(db_url, {"ping": ping}, [Slot((10,), 2)], poll_interval=0.1,
                              sweep_interval=None, tick_interval=None))
    [submitted] = submit(conn, "ping")  # the pool is up and runs the kind
    wait_for("the submitted run to end", lambda: all_terminal(conn, [submitted]), 5)
    assert statuses(conn, [submitted]) == {submitted: "succeeded"}
    time.sleep(1.0)  # five ticks at 0.2 s
    assert schedule_runs(conn, "ping") == {}
    assert value(conn, "SELECT next_slot < now() AND last_slot IS NULL FROM runq.schedules"
                 " WHERE name = 'ping'") is True
    # Something else ticks instead (an operator, pg_cron): the pool runs what it made.
    [(run, outcome)] = conn.execute("SELECT run_id, outcome FROM runq.tick()").fetchall()
    assert outcome == "created"
    wait_for("the ticked run to end", lambda: all_terminal(conn, [run]), 5)
    assert schedule_runs(conn, "ping") == {run: "succeeded"}


def test_pool_ticks_schedules_again_at_once_after_a_full_batch(
        db_url: str, conn: psycopg.Connection[Any], pools: list[WorkerPool],
        caplog: pytest.LogCaptureFixture) -> None:
    async def other(ctx: AsyncRunContext) -> None:
        raise AssertionError("no run of this kind is submitted")

    # 150 due schedules, more than one tick takes (100); the next tick is 30 s
    # away, so the pool's first tick and the one right after it make them all.
    conn.execute("SELECT count(runq.create_schedule('s' || g, 'acme', 'batch',"
                 " every => interval '1 hour')) FROM generate_series(1, 150) AS g")
    make_due(conn)
    started(pools, WorkerPool(db_url, {"other": other}, [Slot((10,), 1)], poll_interval=0.2,
                              sweep_interval=None, tick_interval=30.0))
    wait_for("a run for each schedule", lambda: value(
        conn, "SELECT count(*) = 150 FROM runq.runs WHERE schedule IS NOT NULL"), 5,
        lambda: value(conn, "SELECT count(*) FROM runq.runs"))
    assert conn.execute("SELECT count(DISTINCT schedule), count(*) FILTER (WHERE status = 'queued')"
                        "  FROM runq.runs").fetchone() == (150, 150)
    assert value(conn, "SELECT count(*) FROM runq.schedules WHERE next_slot <= now()") == 0
    assert errors_logged(caplog) == []
