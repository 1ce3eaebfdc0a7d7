"""The worker pool: reserved capacity, the stop after a fence,
and graceful shutdown. Real server, real threads and processes."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from runq import Client
from runq.pool import AsyncRunContext, RunContext, RunStopped, Slot, WorkerPool


def events(conn: psycopg.Connection, run_id: int) -> list[tuple[str, int]]:
    return [(t, e) for t, e in conn.execute(
        "SELECT type, epoch FROM runq.run_events(%s)", [run_id]).fetchall()]


def wait_for(predicate, timeout: float = 10.0, every: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("timed out waiting")


def test_reserved_slot_claims_interactive_run_behind_async_backlog(db_url, conn):
    poll = 0.5
    conn.execute("""SELECT count(*) FROM generate_series(1, 5000) AS g,
                    LATERAL runq.submit('t', 'slow', jsonb_build_object('n', g), priority => 10) AS s""")
    release = threading.Event()

    def slow(ctx: RunContext) -> None:
        release.wait(30)

    def quick(ctx: RunContext) -> str:
        return "answered"

    pool = WorkerPool(db_url, {"slow": slow, "chat": quick},
                      [Slot((0,), 1), Slot((0, 10), 3)], poll_interval=poll, sweep_interval=None)
    pool.start()
    try:
        # every [0, 10] slot is busy with an async run
        wait_for(lambda: conn.execute(
            "SELECT count(*) = 3 FROM runq.runs WHERE status = 'running'").fetchone()[0])
        # the reserved slot is idle and waiting: an interactive run arrives
        with Client.connect(db_url) as client:
            run_id = client.submit("t", "chat", priority=0).run_id
        wait_for(lambda: client_status(conn, run_id) == "succeeded", timeout=5)
        created, claimed = conn.execute(
            """SELECT min(created_at) FILTER (WHERE type = 'run.created'),
                      min(created_at) FILTER (WHERE type = 'run.claimed')
                 FROM runq.run_events WHERE run_id = %s""", [run_id]).fetchone()
        latency = (claimed - created).total_seconds()
        print(f"\ninteractive run claimed {latency * 1000:.1f} ms after submit, "
              f"behind 5,000 async runs with every [0, 10] slot busy (poll interval {poll} s)")
        assert latency < 2 * poll
    finally:
        release.set()
        pool.stop()
        pool.join()


def client_status(conn: psycopg.Connection, run_id: int) -> str:
    return conn.execute("SELECT status FROM runq.get_run(%s)", [run_id]).fetchone()[0]


def test_handler_of_reclaimed_run_stops_and_pool_writes_nothing_more(db_url, conn):
    reclaimed = threading.Event()
    observed: list[str] = []

    def work(ctx: RunContext) -> None:
        ctx.begin_turn()
        reclaimed.wait(10)
        time.sleep(0.3)  # a heartbeat (every 0.1 s) sees the fence meanwhile
        observed.append(f"stop_requested={ctx.stop_requested}")
        ctx.checkpoint({"step": 2})  # raises RunStopped, writes nothing

    run_id = conn.execute("SELECT run_id FROM runq.submit('t', 'work')").fetchone()[0]
    pool = WorkerPool(db_url, {"work": work}, [Slot((10,), 1)],
                      lease=timedelta(milliseconds=300), sweep_interval=None, poll_interval=0.1)
    pool.start()
    try:
        wait_for(lambda: ("run.turn_started", 1) in events(conn, run_id))
        # another worker takes the run over: expire the lease and reclaim it
        conn.execute("UPDATE runq.runs SET lease_expires_at = clock_timestamp() WHERE run_id = %s",
                     [run_id])
        conn.execute("SELECT runq.sweep()")
        conn.execute("UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = %s", [run_id])
        epoch = conn.execute("SELECT epoch FROM runq.claim(ARRAY[10], 'other')").fetchone()[0]
        assert epoch == 2
        reclaimed.set()
        wait_for(lambda: not pool.inflight())
        conn.execute("SELECT runq.complete(%s, 2, '{\"by\": \"other\"}')", [run_id])
    finally:
        pool.stop()
        pool.join()
    assert observed == ["stop_requested=True"]
    log = events(conn, run_id)
    after_reclaim = log[log.index(("run.claimed", 2)):]
    assert [e for e in after_reclaim if e[1] == 1 and e[0] != "run.fenced"] == []
    assert ("run.checkpointed", 1) not in log
    assert log[-1] == ("run.succeeded", 2)
    assert sum(1 for t, _ in log if t == "run.fenced") <= 1


HANDLERS = textwrap.dedent("""
    import pathlib, time
    def short(ctx):
        # in flight until the test has sent SIGTERM, however slowly the pool started
        gate = pathlib.Path("sigterm-sent")
        while not gate.exists():
            time.sleep(0.05)
        return {"done": "short"}
    def long(ctx):
        ctx.begin_tool("c1", "search", "read_only")
        time.sleep(60)
    HANDLERS = {"short": short, "long": long}
""")


def test_sigterm_finishes_short_handler_and_releases_long_one(db_url, conn, tmp_path: Path):
    (tmp_path / "handlers_sigterm.py").write_text(HANDLERS)
    short = conn.execute("SELECT run_id FROM runq.submit('t', 'short')").fetchone()[0]
    long = conn.execute("SELECT run_id FROM runq.submit('t', 'long')").fetchone()[0]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "runq.pool", "handlers_sigterm", "--database-url", db_url,
         "--slot", "10:2", "--grace", "2", "--lease", "30", "--sweep-every", "0"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: conn.execute(
            "SELECT count(*) = 2 FROM runq.runs WHERE status = 'running'").fetchone()[0],
            timeout=30)
        wait_for(lambda: conn.execute("SELECT count(*) FROM runq.tool_calls(%s)", [long]).fetchone()[0])
        worker.send_signal(signal.SIGTERM)
        (tmp_path / "sigterm-sent").touch()
        out, _ = worker.communicate(timeout=20)
    finally:
        worker.kill()
    assert worker.returncode == 0, out
    assert client_status(conn, short) == "succeeded"
    # released: queued again at once, the attempt given back, the tool call retryable
    run = conn.execute("SELECT status, attempts, scheduled_for FROM runq.get_run(%s)",
                       [long]).fetchone()
    assert run == ("queued", 0, None)
    assert [t for t, in conn.execute(
        "SELECT status FROM runq.tool_calls(%s)", [long]).fetchall()] == ["retryable"]
    # another pool claims it again at once
    with Client.connect(db_url) as client:
        claimed = client.claim([10], worker_id="next-pool")
    assert [(c.run_id, c.epoch, c.resumed) for c in claimed] == [(long, 2, True)]


# -- cost and time ----------------------------------------------------------------------


def test_budget_gate_stops_the_handler_with_its_reason(db_url, conn):
    seen: list = []

    def metered(ctx: RunContext) -> None:
        seen.append((ctx.run.resumed, ctx.budget, ctx.usage, ctx.deadline))
        try:
            while True:
                ctx.begin_turn()  # the gate: RunStopped once a total reached its budget
                seen.append(ctx.record_usage({"cost_usd": Decimal("0.4"), "input_tokens": 100}))
        except RunStopped as stopped:
            seen.append((stopped.reason, str(stopped)))
            raise

    with Client.connect(db_url) as client:
        run = client.submit("t", "metered", budget={"cost_usd": 1},
                            timeout=timedelta(hours=1)).run_id
        # A first attempt spent 0.5, then gave the run back: the pool's attempt sees it.
        [first] = client.claim([10])
        assert client.record_usage(run, first.epoch, {"cost_usd": Decimal("0.5")}) is True
        assert client.release(run, first.epoch) is True
        deadline = client.get_run(run).deadline
        pool = WorkerPool(db_url, {"metered": metered}, [Slot((10,), 1)], poll_interval=0.1,
                          sweep_interval=None)
        pool.start()
        try:
            wait_for(lambda: client_status(conn, run) == "failed")
            wait_for(lambda: not pool.inflight())
        finally:
            pool.stop()
            pool.join()
        done = client.get_run(run)
    assert seen[0] == (True, {"cost_usd": 1}, {"cost_usd": Decimal("0.5")}, deadline)
    assert deadline is not None
    # 0.5 and 0.9 are under 1: two turns; at 1.3 the third begin_turn stops it.
    assert seen[1:3] == [True, True], seen
    reason, message = seen[3]
    assert reason == "budget_exhausted", seen
    assert message.startswith(f"run {run} epoch 2 failed: ") and "cost_usd" in message, message
    assert len(seen) == 4
    assert done.failure is not None and done.failure["code"] == "budget_exhausted"
    assert done.usage == {"cost_usd": Decimal("1.3"), "input_tokens": 200}
    log = events(conn, run)
    assert log[-1] == ("run.failed", 2), log  # the pool wrote nothing after the gate
    assert ("run.fenced", 2) not in log


@pytest.mark.parametrize("noticed_by", ["write", "heartbeat"])
def test_deadline_stops_the_handler_with_its_reason(db_url, conn, noticed_by):
    # A lease of 30 s: no heartbeat in time, the handler's next write meets the
    # deadline. A lease of 0.3 s: a heartbeat meets it first, and the handler's
    # next write is refused by the pool itself, with the reason it read.
    seen: list = []

    def late(ctx: RunContext) -> None:
        assert ctx.deadline is not None
        try:
            ctx.begin_turn()
            while datetime.now(timezone.utc) < ctx.deadline + timedelta(milliseconds=100):
                time.sleep(0.02)
            if noticed_by == "heartbeat":
                give_up = time.monotonic() + 5
                while not ctx.stop_requested and time.monotonic() < give_up:
                    time.sleep(0.02)
            seen.append(ctx.stop_requested)
            ctx.checkpoint({"late": True})
            seen.append("written")
        except RunStopped as stopped:
            seen.append(stopped.reason)
        # Spend after the stop is still recorded: False, no RunStopped.
        seen.append(ctx.record_usage({"cost_usd": 1}))
        try:
            ctx.checkpoint({"later": True})
        except RunStopped as stopped:
            seen.append(("again", stopped.reason))

    lease = timedelta(seconds=30) if noticed_by == "write" else timedelta(milliseconds=300)
    with Client.connect(db_url) as client:
        run = client.submit("t", "late", timeout=timedelta(seconds=1)).run_id
        pool = WorkerPool(db_url, {"late": late}, [Slot((10,), 1)], lease=lease,
                          poll_interval=0.1, sweep_interval=None)
        pool.start()
        try:
            wait_for(lambda: len(seen) == 4)
            wait_for(lambda: not pool.inflight())
        finally:
            pool.stop()
            pool.join()
        done = client.get_run(run)
    assert seen == [noticed_by == "heartbeat", "deadline_exceeded", False,
                    ("again", "deadline_exceeded")], seen
    assert done.status == "failed" and done.failure is not None
    assert done.failure["code"] == "deadline_exceeded"
    assert done.usage == {"cost_usd": 1}
    kinds = [t for t, _ in events(conn, run)]
    assert kinds.index("run.failed") < kinds.index("run.usage")
    assert "run.checkpointed" not in kinds and kinds.count("run.fenced") <= 1


@pytest.mark.parametrize("how", ["reclaimed", "cancelled"])
def test_usage_of_a_stopped_run_is_recorded_and_the_stop_has_its_reason(db_url, conn, how):
    stopped_now = threading.Event()
    seen: list = []

    def work(ctx: RunContext) -> None:
        ctx.begin_turn()
        stopped_now.wait(10)
        give_up = time.monotonic() + 5
        while not ctx.stop_requested and time.monotonic() < give_up:
            time.sleep(0.02)  # a heartbeat (every 0.1 s) finds out
        seen.append(ctx.stop_requested)
        seen.append(ctx.record_usage({"input_tokens": 1200}))  # the model call's spend
        try:
            ctx.checkpoint({"step": 2})
        except RunStopped as stopped:
            seen.append((stopped.reason, str(stopped)))

    run = conn.execute("SELECT run_id FROM runq.submit('t', 'work')").fetchone()[0]
    pool = WorkerPool(db_url, {"work": work}, [Slot((10,), 1)],
                      lease=timedelta(milliseconds=300), sweep_interval=None, poll_interval=0.1)
    pool.start()
    try:
        wait_for(lambda: ("run.turn_started", 1) in events(conn, run))
        if how == "reclaimed":
            conn.execute("UPDATE runq.runs SET lease_expires_at = clock_timestamp()"
                         " WHERE run_id = %s", [run])
            conn.execute("SELECT runq.sweep()")
            conn.execute("UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = %s", [run])
            assert conn.execute("SELECT epoch FROM runq.claim(ARRAY[10], 'other')"
                                ).fetchone()[0] == 2
        else:
            assert conn.execute("SELECT runq.cancel(%s)", [run]).fetchone()[0] == \
                "cancel_requested"
        stopped_now.set()
        wait_for(lambda: len(seen) == 3)
        wait_for(lambda: not pool.inflight())
    finally:
        pool.stop()
        pool.join()
    reason, message = seen[2]
    assert seen[:2] == [True, False], seen
    assert reason == ("fenced" if how == "reclaimed" else "cancelled"), seen
    assert message == f"run {run} epoch 1 is no longer ours", message
    usage = conn.execute("SELECT usage FROM runq.get_run(%s)", [run]).fetchone()[0]
    assert usage == {"input_tokens": 1200}
    assert ("run.usage", 1) in events(conn, run) and ("run.checkpointed", 1) not in events(
        conn, run)


# -- child runs ---------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_parent_spawns_waits_for_and_reads_its_children(db_url, conn, style):
    # The parent's first attempt spawns two children (the same key again is
    # the same child) and waits: its handler ends there, and a write after
    # the wait raises RunStopped "finished". The pool runs the children (held
    # until the parent waits), the last one's end queues the parent, and its
    # resumed claim reads their results through ctx.children().
    seen: list = []
    waiting = threading.Event()

    def sync_parent(ctx: RunContext):
        if ctx.run.resumed:
            return {k.key: [k.run_id, k.status, k.result] for k in ctx.children()}
        a = ctx.spawn("a", "child", {"n": 1})
        b = ctx.spawn("b", "child", {"n": 2}, max_attempts=1)
        seen.append((a, b, ctx.spawn("a", "child", {"n": 1})))
        ctx.wait_children()
        waiting.set()
        try:
            ctx.checkpoint({"late": True})
        except RunStopped as stopped:
            seen.append(stopped.reason)
        return {"not": "written"}

    async def async_parent(ctx: AsyncRunContext):
        if ctx.run.resumed:
            return {k.key: [k.run_id, k.status, k.result] for k in await ctx.children()}
        a = await ctx.spawn("a", "child", {"n": 1})
        b = await ctx.spawn("b", "child", {"n": 2}, max_attempts=1)
        seen.append((a, b, await ctx.spawn("a", "child", {"n": 1})))
        await ctx.wait_children()
        waiting.set()
        try:
            await ctx.checkpoint({"late": True})
        except RunStopped as stopped:
            seen.append(stopped.reason)
        return {"not": "written"}

    def child(ctx: RunContext):
        assert ctx.children() == []
        waiting.wait(10)
        return {"double": ctx.run.payload["n"] * 2}

    handlers = {"parent": sync_parent if style == "sync" else async_parent, "child": child}
    pool = WorkerPool(db_url, handlers, [Slot((10,), 3)], poll_interval=0.1,
                      sweep_interval=None)
    with Client.connect(db_url) as client:
        run = client.submit("t", "parent").run_id
        pool.start()
        try:
            wait_for(lambda: client_status(conn, run) == "succeeded")
            wait_for(lambda: not pool.inflight())
        finally:
            pool.stop()
            pool.join()
        done = client.get_run(run)
        kids = client.children(run)
    (a, b, again), reason = seen
    assert (again, reason) == (a, "finished"), seen
    assert [(k.key, k.run_id, k.status) for k in kids] == [("a", a, "succeeded"),
                                                            ("b", b, "succeeded")]
    assert done.result == {"a": [a, "succeeded", {"double": 2}],
                           "b": [b, "succeeded", {"double": 4}]}
    assert events(conn, run) == [
        ("run.created", 0), ("run.claimed", 1), ("run.spawned", 1), ("run.spawned", 1),
        ("run.waiting_for_children", 1), ("run.children_done", 1), ("run.claimed", 2),
        ("run.succeeded", 2)], events(conn, run)


def test_spawn_of_a_cancelled_run_stops_the_handler_and_creates_nothing(db_url, conn):
    go = threading.Event()
    seen: list = []

    def parent(ctx: RunContext) -> None:
        go.wait(10)
        try:
            ctx.spawn("a", "child")
        except RunStopped as stopped:
            seen.append(stopped.reason)
        try:
            ctx.wait_children()
        except RunStopped as stopped:
            seen.append(("again", stopped.reason))

    pool = WorkerPool(db_url, {"parent": parent}, [Slot((10,), 1)], poll_interval=0.1,
                      sweep_interval=None)
    with Client.connect(db_url) as client:
        run = client.submit("t", "parent").run_id
        pool.start()
        try:
            wait_for(lambda: client_status(conn, run) == "running")
            assert client.cancel(run) == "cancel_requested"
            go.set()
            wait_for(lambda: len(seen) == 2)
            wait_for(lambda: not pool.inflight())
        finally:
            pool.stop()
            pool.join()
        assert client.children(run) == []
        assert client.get_run(run).status == "cancelled"
    assert seen == ["cancelled", ("again", "cancelled")]
    assert "run.spawned" not in [t for t, _ in events(conn, run)]
