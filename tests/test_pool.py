"""The worker pool: reserved capacity, the stop after a fence,
and graceful shutdown. Real server, real threads and processes."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import psycopg
from runq import Client
from runq.pool import RunContext, Slot, WorkerPool


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
