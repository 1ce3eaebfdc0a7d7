"""Submit under real concurrency (idempotency keys, sessions), and NOTIFY runq.

Every test talks to a real server through separate connections (the `db_url`,
`conn` and `connect` fixtures of conftest.py): no mocks. Concurrent calls are
lined up behind an advisory lock held by the test, so that all of them are
parked inside the server before any of them starts, and then released at
once; each scenario is repeated over several rounds.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

CONNECTIONS = 8
ROUNDS = 10
GATE_WAIT = 30.0  # seconds to wait for every racer to park on the gate
NOTIFY_WAIT = 10.0  # seconds a listener waits for its wake-up

Connect = Callable[[], psycopg.Connection[Any]]


# --------------------------------------------------------------------------
# helpers


class Gate:
    """Parks connections on an advisory lock the holder owns, then frees them all at once."""

    def __init__(self, holder: psycopg.Connection[Any], key: int) -> None:
        self.holder = holder
        self.key = key
        holder.execute("SELECT pg_advisory_lock(%s)", [key])

    def wait(self, conn: psycopg.Connection[Any]) -> None:
        """Called by each racer: blocks in the server until the gate opens."""
        conn.execute("SELECT pg_advisory_lock_shared(%s)", [self.key])

    def leave(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT pg_advisory_unlock_shared(%s)", [self.key])

    def open_when_full(self, racers: int, futures: list[Any]) -> None:
        deadline = time.monotonic() + GATE_WAIT
        while True:
            waiting = self.holder.execute(
                """
                SELECT count(*) FROM pg_catalog.pg_locks AS l
                 WHERE l.locktype = 'advisory' AND NOT l.granted
                   AND l.database = (SELECT d.oid FROM pg_catalog.pg_database AS d
                                      WHERE d.datname = pg_catalog.current_database())
                   AND l.classid::bigint = 0 AND l.objid::bigint = %s AND l.objsubid = 1
                """,
                [self.key],
            ).fetchone()[0]
            if waiting == racers:
                break
            for f in futures:  # a racer that died before parking would hang us
                if f.done():
                    f.result()
            assert time.monotonic() < deadline, f"only {waiting} of {racers} racers reached the gate"
            time.sleep(0.005)
        self.holder.execute("SELECT pg_advisory_unlock(%s)", [self.key])


def race(
    conn: psycopg.Connection[Any],
    racers: list[psycopg.Connection[Any]],
    key: int,
    call: Callable[[psycopg.Connection[Any]], Any],
) -> list[tuple[str, Any]]:
    """Runs `call` on every racer connection at once; returns ('ok', value) or ('error', exc) each."""
    gate = Gate(conn, key)

    def one(c: psycopg.Connection[Any]) -> tuple[str, Any]:
        gate.wait(c)
        try:
            return ("ok", call(c))
        except psycopg.Error as e:
            return ("error", e)
        finally:
            gate.leave(c)

    with ThreadPoolExecutor(max_workers=len(racers)) as pool:
        futures = [pool.submit(one, c) for c in racers]
        gate.open_when_full(len(racers), futures)
        return [f.result() for f in futures]


def submit(c: psycopg.Connection[Any], **args: Any) -> tuple[int, str]:
    """runq.submit with named arguments, only those given."""
    names = list(args)
    named = ", ".join(f"{n} => %s" for n in names)
    sql = f"SELECT run_id, outcome FROM runq.submit({named})"
    values = [Jsonb(v) if isinstance(v, dict) else v for v in args.values()]
    row = c.execute(sql, values).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def events(c: psycopg.Connection[Any], run_id: int) -> list[tuple[int, str]]:
    return [(int(r[0]), str(r[1])) for r in c.execute(
        "SELECT epoch, type FROM runq.run_events(run_id => %s)", [run_id]).fetchall()]


def runs_of_tenant(c: psycopg.Connection[Any], tenant: str) -> list[tuple[int, str | None, str]]:
    return [(int(r[0]), r[1], str(r[2])) for r in c.execute(
        "SELECT r.run_id, r.session_id, r.status FROM runq.runs AS r WHERE r.tenant_id = %s ORDER BY r.run_id",
        [tenant]).fetchall()]


# --------------------------------------------------------------------------
# idempotency key and session routing under contention


def test_eight_connections_one_idempotency_key_create_one_run(conn: psycopg.Connection[Any], connect: Connect) -> None:
    racers = [connect() for _ in range(CONNECTIONS)]
    for rnd in range(ROUNDS):
        tenant = f"idem-{rnd}"
        request = {"tenant_id": tenant, "kind": "chat.turn", "payload": {"round": rnd},
                   "principal_id": "alice", "idempotency_key": f"key-{rnd}"}
        results = race(conn, racers, 7000 + rnd, lambda c, r=request: submit(c, **r))

        errors = [r[1] for r in results if r[0] == "error"]
        assert not errors, f"round {rnd}: submits with one key raised: " + "; ".join(
            f"{e.sqlstate}: {e}" for e in errors)
        rows = [r[1] for r in results]
        run_ids = {run_id for run_id, _ in rows}
        outcomes = sorted(outcome for _, outcome in rows)
        assert len(run_ids) == 1, f"round {rnd}: one key gave several runs: {rows}"
        assert outcomes == ["created"] + ["duplicate"] * (CONNECTIONS - 1), f"round {rnd}: {rows}"

        (run_id,) = run_ids
        assert runs_of_tenant(conn, tenant) == [(run_id, None, "queued")], f"round {rnd}"
        assert events(conn, run_id) == [(0, "run.created")], f"round {rnd}"

        # And afterwards, serially, the key still routes to the same run.
        assert submit(conn, **request) == (run_id, "duplicate")


def test_eight_connections_one_idle_session_create_one_run(conn: psycopg.Connection[Any], connect: Connect) -> None:
    racers = [connect() for _ in range(CONNECTIONS)]
    for rnd in range(ROUNDS):
        tenant = f"sess-{rnd}"
        session = f"s-{rnd}"
        request = {"tenant_id": tenant, "kind": "chat.turn", "session_id": session,
                   "payload": {"round": rnd}, "priority": 0}
        results = race(conn, racers, 8000 + rnd, lambda c, r=request: submit(c, **r))

        created = [r[1] for r in results if r[0] == "ok"]
        errors = [r[1] for r in results if r[0] == "error"]
        assert len(created) == 1, f"round {rnd}: {len(created)} submits succeeded: {results}"
        run_id, outcome = created[0]
        assert outcome == "created", f"round {rnd}"

        states = sorted(str(e.sqlstate) for e in errors)
        assert states == ["RQ002"] * (CONNECTIONS - 1), (
            f"round {rnd}: losers got {[(e.sqlstate, str(e)) for e in errors]}")
        for e in errors:
            detail = e.diag.message_detail or ""
            assert re.search(rf"\b{run_id}\b", detail), (
                f"round {rnd}: RQ002 DETAIL does not name active run {run_id}: {detail!r} ({e})")

        assert runs_of_tenant(conn, tenant) == [(run_id, session, "queued")], f"round {rnd}"
        assert events(conn, run_id) == [(0, "run.created")], f"round {rnd}"


# --------------------------------------------------------------------------
# LISTEN runq


class Listener:
    """A connection that LISTENs on runq and waits for one notification in a thread."""

    def __init__(self, connect: Connect) -> None:
        self.conn = connect()
        self.conn.execute("LISTEN runq")
        self.got: list[psycopg.Notify] = []
        self._thread: threading.Thread | None = None

    def quiet(self, seconds: float = 0.2) -> None:
        """Nothing arrives before the action under test (the listener joined after the setup)."""
        early = list(self.conn.notifies(timeout=seconds))
        assert early == [], f"listener woken before the action: {early}"

    def start(self) -> None:
        def wait() -> None:
            for n in self.conn.notifies(timeout=NOTIFY_WAIT, stop_after=1):
                self.got.append(n)

        self._thread = threading.Thread(target=wait, daemon=True)
        self._thread.start()

    def woken(self) -> list[psycopg.Notify]:
        assert self._thread is not None
        self._thread.join(NOTIFY_WAIT + 5)
        assert not self._thread.is_alive()
        return self.got


def expect_wake(connect: Connect, action: Callable[[], Any], idle: bool = False) -> Any:
    """action wakes a listener. idle: the listener first comes back short
    from a claim (of an empty class), as a worker does before it waits: a
    submit notifies only then (tests/test_wake.py); deliver_input, a requeue,
    redrive and resume notify in any case."""
    listener = Listener(connect)
    if idle:
        assert listener.conn.execute("SELECT count(*) FROM runq.claim(ARRAY[32000])").fetchone()[0] == 0
    listener.quiet()
    listener.start()
    result = action()
    got = listener.woken()
    assert got, f"LISTEN runq was not woken within {NOTIFY_WAIT} s"
    assert all(n.channel == "runq" for n in got)
    return result


def claim(c: psycopg.Connection[Any], classes: list[int], lease: timedelta | None = None) -> list[tuple[Any, ...]]:
    if lease is None:
        return c.execute("SELECT run_id, epoch, lease_expires_at FROM runq.claim(classes => %s)",
                         [classes]).fetchall()
    return c.execute("SELECT run_id, epoch, lease_expires_at FROM runq.claim(classes => %s, lease => %s)",
                     [classes, lease]).fetchall()


def waiting_run(conn: psycopg.Connection[Any], session: str) -> tuple[int, int]:
    run_id, outcome = submit(conn, tenant_id="acme", kind="chat.turn", session_id=session, priority=0)
    assert outcome == "created"
    rows = claim(conn, [0])
    assert [r[0] for r in rows] == [run_id]
    epoch = int(rows[0][1])
    asked = conn.execute("SELECT runq.ask_user(run_id => %s, epoch => %s, question => %s)",
                         [run_id, epoch, Jsonb({"q": "which city?"})]).fetchone()[0]
    assert asked is True
    return run_id, epoch


def status(c: psycopg.Connection[Any], run_id: int) -> str:
    return str(c.execute("SELECT status FROM runq.get_run(run_id => %s)", [run_id]).fetchone()[0])


def test_listener_is_woken_by_a_submit(conn: psycopg.Connection[Any], connect: Connect) -> None:
    run_id, outcome = expect_wake(
        connect, lambda: submit(conn, tenant_id="acme", kind="chat.turn", session_id="s1", priority=0),
        idle=True)
    assert outcome == "created"
    assert status(conn, run_id) == "queued"


def test_listener_is_woken_by_deliver_input(conn: psycopg.Connection[Any], connect: Connect) -> None:
    run_id, _ = waiting_run(conn, "s-deliver")
    delivered = expect_wake(connect, lambda: conn.execute(
        "SELECT runq.deliver_input(run_id => %s, input => %s)", [run_id, Jsonb({"a": "Paris"})]).fetchone()[0])
    assert delivered is True
    assert status(conn, run_id) == "queued"


def test_listener_is_woken_by_a_submit_routed_as_input(conn: psycopg.Connection[Any], connect: Connect) -> None:
    run_id, _ = waiting_run(conn, "s-route")
    routed = expect_wake(connect, lambda: submit(conn, tenant_id="acme", kind="chat.turn", session_id="s-route",
                                                 payload={"a": "Paris"}, priority=0))
    assert routed == (run_id, "input_delivered")
    assert status(conn, run_id) == "queued"


def test_listener_is_woken_by_a_sweep_requeue(conn: psycopg.Connection[Any], connect: Connect) -> None:
    run_id, _ = submit(conn, tenant_id="acme", kind="chat.turn", session_id="s-sweep", priority=0)
    rows = claim(conn, [0], lease=timedelta(milliseconds=2))
    assert [r[0] for r in rows] == [run_id]
    expires = rows[0][2]
    # Let the lease lapse on the database clock.
    while not conn.execute("SELECT pg_catalog.clock_timestamp() > %s", [expires]).fetchone()[0]:
        conn.execute("SELECT pg_catalog.pg_sleep(0.005)")

    swept = expect_wake(connect, lambda: conn.execute("SELECT run_id, action FROM runq.sweep()").fetchall())
    assert [(int(r[0]), str(r[1])) for r in swept] == [(run_id, "requeued")]
    assert status(conn, run_id) == "queued"
    assert [t for _, t in events(conn, run_id)] == ["run.created", "run.claimed", "run.requeued"]
