"""PgBouncer in transaction pooling mode: the client's whole
lifecycle and the worker pool work through Debian's pgbouncer, started here.

What transaction pooling changes for a runq client:

* Each transaction may run on another server connection, and several clients
  share one. runq needs nothing more: every runq call is one statement in its
  own short transaction, and runq keeps no session state (its functions pin
  their search_path; PL/pgSQL caches plans per server connection, which is
  fine).
* Named prepared statements do not survive the hop: psycopg prepares a query
  it has run prepare_threshold (5) times, and with PgBouncer 1.18 (Debian 12)
  the statement lands on one server connection and collides with, or misses,
  another client's (42P05 "prepared statement "_pg3_0" already exists", or
  26000 "... does not exist"). Connect with prepare_threshold=None. (psycopg
  >= 3.2 with libpq >= 17 can use PgBouncer >= 1.22's max_prepared_statements
  instead; Debian 12's PgBouncer is too old for that.)
* LISTEN does not work: the LISTEN runs on some server connection, which
  PgBouncer then gives to others, and it drops the notifications that arrive
  there ("got packet 'A' from server when not linked"). The pool's idle slots
  then wake on poll_interval alone.

The PgBouncer is conftest.py's ``bouncer`` fixture, which test_pool_async.py
shares.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from pgutil import Bouncer
from psycopg_pool import ConnectionPool
from runq import Client
from runq.errors import InvalidArgument, InvalidRunState, RunNotFound, SessionBusy
from runq.pool import RunContext, Slot, WorkerPool


def test_really_transaction_pooling(bouncer: Bouncer) -> None:
    # Two statements of one client land on different server connections when
    # another client holds the first in between: the setup is what it claims.
    with psycopg.connect(bouncer.url, autocommit=True, prepare_threshold=None) as a, \
            psycopg.connect(bouncer.url, autocommit=True, prepare_threshold=None) as b:
        first = a.execute("SELECT pg_backend_pid()").fetchone()
        with b.transaction():
            held = b.execute("SELECT pg_backend_pid()").fetchone()
            second = a.execute("SELECT pg_backend_pid()").fetchone()
        assert held == first and second != first, (first, held, second)


def test_default_prepared_statements_break_through_pgbouncer(bouncer: Bouncer) -> None:
    # Why the client must connect with prepare_threshold=None here: two
    # clients with psycopg's default both prepare their fifth repeat as
    # "_pg3_0" on the one server connection they share.
    with Client.connect(bouncer.one_url) as a, Client.connect(bouncer.one_url) as b:
        run_id = a.submit("pgb", "k", priority=9000).run_id
        for _ in range(6):
            a.get_run(run_id)
        with pytest.raises((psycopg.errors.DuplicatePreparedStatement,
                            psycopg.errors.InvalidSqlStatementName)):
            for _ in range(6):
                b.run_events(run_id)


def test_client_lifecycle_through_pgbouncer(bouncer: Bouncer, conn: psycopg.Connection) -> None:
    # Several clients share two server connections, each going through every
    # call of the API more than prepare_threshold times.
    errors: list[BaseException] = []

    def lifecycle(n: int) -> None:
        try:
            with Client.connect(bouncer.url, prepare_threshold=None) as c:
                for i in range(6):
                    one_lifecycle(c, f"t{n}", f"s{n}-{i}", 9100 + n)
        except BaseException as error:  # reported below, with the thread's name
            errors.append(error)

    threads = [threading.Thread(target=lifecycle, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, f"{errors!r}\n--- pgbouncer log ---\n{bouncer.log_tail()}"
    assert conn.execute(
        "SELECT count(*) FROM runq.runs WHERE tenant_id LIKE 't_' AND status = 'succeeded'"
    ).fetchone() == (24,)


def one_lifecycle(c: Client, tenant: str, session: str, cls: int) -> None:
    sub = c.submit(tenant, "chat", {"q": "hi"}, session_id=session, priority=cls,
                   idempotency_key=f"{session}-k")
    assert sub.outcome == "created"
    dup = c.submit(tenant, "chat", {"q": "hi"}, session_id=session, priority=cls,
                   idempotency_key=f"{session}-k")
    assert (dup.run_id, dup.outcome) == (sub.run_id, "duplicate")
    with pytest.raises(SessionBusy):
        c.submit(tenant, "chat", session_id=session, priority=cls)
    [run] = c.claim([cls], worker_id="pgb-worker", lease=timedelta(minutes=1))
    assert (run.run_id, run.epoch, run.attempt, run.resumed) == (sub.run_id, 1, 1, False)
    assert c.heartbeat(run.run_id, run.epoch)
    assert c.checkpoint(run.run_id, run.epoch, {"step": 1})
    assert c.begin_turn(run.run_id, run.epoch)
    assert c.begin_tool(run.run_id, run.epoch, "call-1", "search", "read_only", {"q": "x"})
    assert c.end_tool(run.run_id, run.epoch, "call-1", {"hits": 2})
    assert [(t.call_id, t.status) for t in c.tool_calls(run.run_id)] == [("call-1", "finished")]
    assert c.ask_user(run.run_id, run.epoch, {"question": "which?"})
    assert c.get_run(run.run_id).status == "waiting_for_user"
    assert c.deliver_input(run.run_id, {"answer": "that"})
    [again] = c.claim([cls], worker_id="pgb-worker")
    assert (again.epoch, again.resumed, again.checkpoint, again.inputs) == \
        (2, True, {"step": 1}, [{"answer": "that"}])
    assert not c.heartbeat(run.run_id, run.epoch)          # the old epoch is fenced
    assert c.complete(again.run_id, again.epoch, {"answer": 42})
    got = c.get_run(run.run_id)
    assert (got.status, got.result, got.lease_epoch) == ("succeeded", {"answer": 42}, 2)
    types = [e.type for e in c.run_events(run.run_id)]
    assert types[0] == "run.created" and types[-1] == "run.succeeded" and "run.fenced" in types
    # Errors are mapped through PgBouncer as directly.
    with pytest.raises(RunNotFound):
        c.get_run(-1)
    with pytest.raises(InvalidArgument):
        c.claim([])
    with pytest.raises(InvalidRunState):
        c.deliver_input(run.run_id, {"late": True})
    # Cancel, release, fail, the dead letter, redrive.
    assert c.cancel(run.run_id) == "already_terminal"
    other = c.submit(tenant, "chat", priority=cls).run_id
    [r2] = c.claim([cls])
    assert c.release(r2.run_id, r2.epoch)
    [r2] = c.claim([cls])
    assert c.fail(r2.run_id, r2.epoch, {"code": "boom"})
    assert other in [r.run_id for r in c.dead_letter(max_runs=1000)]
    assert c.redrive(other, "again")
    assert c.cancel(other) == "cancelled"
    c.sweep()
    c.orphan_report()
    c.queue_stats()


def test_client_on_a_psycopg_pool_through_pgbouncer(bouncer: Bouncer) -> None:
    with ConnectionPool(bouncer.url, min_size=1, max_size=4, open=True,
                        kwargs={"autocommit": True, "prepare_threshold": None}) as pool:
        c = Client(pool)
        for i in range(8):
            one_lifecycle(c, "tp", f"pool-s{i}", 9200)


def test_callers_transaction_through_pgbouncer(bouncer: Bouncer, conn: psycopg.Connection) -> None:
    # A submit inside the caller's own transaction commits or rolls back with
    # it: within one transaction PgBouncer keeps one server connection.
    with psycopg.connect(bouncer.url, prepare_threshold=None) as c:
        client = Client(c)
        with c.transaction(force_rollback=True):
            gone = client.submit("tx", "k", priority=9300).run_id
            assert client.get_run(gone).status == "queued"
        with c.transaction():
            kept = client.submit("tx", "k", priority=9300).run_id
            with pytest.raises(RunNotFound):  # a savepoint: the transaction lives on
                client.get_run(-1)
    assert conn.execute("SELECT array_agg(run_id) FROM runq.runs WHERE tenant_id = 'tx'").fetchone() \
        == ([kept],)


def test_listen_gets_nothing_through_pgbouncer(bouncer: Bouncer, db_url: str) -> None:
    # What docs/guides/pgbouncer.md says about LISTEN: through PgBouncer in transaction
    # mode a submit's NOTIFY never arrives; a direct connection gets it.
    with psycopg.connect(bouncer.url, autocommit=True, prepare_threshold=None) as pooled, \
            psycopg.connect(db_url, autocommit=True) as direct, \
            Client.connect(bouncer.url, prepare_threshold=None) as client:
        pooled.execute("LISTEN runq")
        direct.execute("LISTEN runq")
        direct.execute("SELECT count(*) FROM runq.claim(ARRAY[9401])")  # short: a worker is idle
        client.submit("listen", "k", priority=9400)
        assert [n.channel for n in direct.notifies(timeout=5, stop_after=1)] == ["runq"]
        assert list(pooled.notifies(timeout=1.0, stop_after=1)) == []


def wait_for(predicate: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_worker_pool_through_pgbouncer_polls(bouncer: Bouncer, conn: psycopg.Connection) -> None:
    # The pool on PgBouncer: its LISTEN hears nothing (above), so idle slots
    # find work by polling; heartbeats, sweeps and every fenced write go
    # through PgBouncer too. Two batches, the second after the slots have
    # polled many times (each repeated claim would be a prepared statement
    # with psycopg's defaults).
    def handler(ctx: RunContext) -> dict[str, int]:
        ctx.begin_turn()
        ctx.checkpoint({"at": "tool"})
        ctx.begin_tool("c1", "echo", "idempotent", {"n": ctx.run.payload["n"]})
        ctx.end_tool("c1", {"echo": ctx.run.payload["n"]})
        time.sleep(0.05)
        return {"n": ctx.run.payload["n"]}

    poll = 0.2
    pool = WorkerPool(bouncer.url, {"echo": handler}, [Slot((9500,), 2), Slot((9500, 9501), 2)],
                      lease=timedelta(seconds=3), poll_interval=poll, sweep_interval=0.5,
                      grace=5, worker_id="pgb-pool")

    def succeeded(ids: list[int]) -> int:
        return int(conn.execute("SELECT count(*) FROM runq.runs WHERE run_id = ANY(%s) "
                                "AND status = 'succeeded'", [ids]).fetchone()[0])

    # A pool thread that dies (a slot, the heartbeater, the sweeper) must fail
    # the test even when the threads left finish the runs.
    died: list[str] = []
    previous_hook = threading.excepthook

    def record(args: threading.ExceptHookArgs) -> None:
        died.append(f"{args.thread.name if args.thread else '?'}: "
                    f"{args.exc_type.__name__}: {args.exc_value}")

    threading.excepthook = record
    pool.start()
    try:
        with Client.connect(bouncer.url, prepare_threshold=None) as client:
            first = [client.submit("pool", "echo", {"n": n}, priority=9500 + n % 2).run_id
                     for n in range(12)]
            wait_for(lambda: died or succeeded(first) == len(first), 30)
            time.sleep(10 * poll)  # every slot polls past psycopg's prepare threshold
            second = [client.submit("pool", "echo", {"n": n}, priority=9500).run_id
                      for n in range(12, 20)]
            wait_for(lambda: died or succeeded(second) == len(second), 30)
    finally:
        pool.stop()
        pool.join()
        threading.excepthook = previous_hook
    assert not died, "pool threads died:\n" + "\n".join(died)
    assert (succeeded(first), succeeded(second)) == (12, 8), bouncer.log_tail()
    results = dict(conn.execute("SELECT (payload->>'n')::int, (result->>'n')::int FROM runq.runs "
                                "WHERE tenant_id = 'pool'").fetchall())
    assert results == {n: n for n in range(20)}
    assert conn.execute("SELECT count(*) FROM runq.run_events WHERE type = 'run.fenced'"
                        ).fetchone() == (0,)
    assert conn.execute("SELECT count(DISTINCT e.payload->>'worker_id') FROM runq.run_events AS e "
                        "WHERE e.type = 'run.claimed'").fetchone() == (1,)
