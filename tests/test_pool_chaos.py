"""Chaos for the worker pool: handlers and servers that misbehave, one test per
failure. Real server, real pool threads, short leases; every wait polls the
database (or the pool) against a deadline. Handlers: tests/chaos_handlers.py.

Every test runs twice, through the ``flavour`` fixture: with the ``def``
handlers (``sync``: each in a thread of its own) and with their ``async
def`` twins (``async``: awaited on the pool's event loop). The expectations
are the same but where a test says otherwise: a coroutine can be cancelled,
a thread cannot.

After each scenario, ``after_checks`` asserts the same three things:
  (a) every slot still claims: one fresh probe run per slot, in that slot's
      class, all succeed, each held by a different slot at the same time
      (they meet at a barrier) -- the stuck slot of the "never returns" test
      is left out;
  (b) no run is ``running`` without a live heartbeat: for every running run,
      ``heartbeat_at`` is within a lease, ``lease_expires_at`` is in the future
      and the run is in ``pool.inflight()`` (sampled over a lease);
  (c) nothing was dead-lettered that should not be: the failed runs and their
      failure codes are exactly the expected ones.

The tests:
  test_result_not_json[set|nan]
      a handler returns a set / float('nan'): the run fails with code
      ``result_not_json`` and a message naming the type / NaN; the only slot
      goes on claiming.
  test_base_exception[Boom|GeneratorExit]
      a handler raises ``class Boom(BaseException)`` / GeneratorExit: the run
      fails with that class name as its code and the exception's message; the
      only slot goes on claiming.
  test_handler_that_never_returns[release|no_connection]
      one slot's handler blocks on an event: the other slots keep completing
      runs, the stuck run's lease keeps moving (past several lease lengths,
      never lapsing, with a sweeper running); stop() and join() return within
      grace + a few seconds. ``release``: the run is released (queued, attempt
      given back, claimable now), and the handler's late return writes
      nothing. ``no_connection``: the database refuses new connections from
      the moment stop() is called, and join() still returns in time, without
      raising. By then a sync handler is still blocked (nothing stops its
      thread) and returns once the test opens its gate; an async one has
      been cancelled (the pool cancels what is left after the releases).
  test_purged_run_under_live_worker
      run A (held by the pool) is swept, claimed by the test (epoch 2),
      completed and purged in one transaction, so the pool's next heartbeat
      of A raises RQ003: run B in the other slot keeps its lease for three
      lease lengths, A leaves pool.inflight(), A's handler gets RunStopped at
      its next write. (An async handler whose run was stopped is cancelled
      after stop_grace, 5 s by default; A's gate opens about as late, so
      this pool's stop_grace is longer, for A's next write to come first.)
  test_checkpoint_stalled_by_lock_keeps_other_leases
      A's checkpoint waits three lease lengths on LOCK TABLE runq.checkpoints
      held by another session, with a sweeper running: B's lease never lapses
      (no run.requeued or run.fenced for B); once the lock goes, A's stalled
      checkpoint lands under epoch 1 and A completes under epoch 1.
  test_database_restart_mid_run
      a private cluster (as in test_faults.py) is restarted (pg_ctl restart
      -m fast) while three runs pause between two checkpoints: heartbeats
      come back (each run's heartbeat_at after the server's new start),
      every run then succeeds exactly once under its first epoch
      (one run.succeeded each), none fails, the slots claim again.
  test_unknown_kind_ahead_of_handled_kind
      three runs of a kind without a handler queued ahead of three with one,
      same class: the handled ones succeed, the others stay queued, never
      claimed (attempts 0, lease_epoch 0); nothing fails.
  test_interrupt_in_handler_stops_the_pool[SystemExit|KeyboardInterrupt]
      a handler raises SystemExit / KeyboardInterrupt while the other slot
      holds a run: the pool stops by itself (join() returns within grace +
      3 s; the test never calls stop()), both runs are released ('resume':
      queued, attempts 0, claimable now, run.requeued last), nothing fails.
      (a) cannot apply to a stopped pool: a new pool claims and completes
      both runs instead (the one that raised under epoch 2), and
      after_checks run on it. At join() the other handler, if sync, is
      still blocked and its late return writes nothing; if async, it was
      cancelled after its release.
  test_row_locked_by_another_session_keeps_other_leases
      another session holds A's row FOR UPDATE for three lease lengths, with
      a sweeper running: B's lease never lapses, no heartbeat waits on A's
      row longer than a heartbeat interval (each carries a lock timeout of
      lease/12), A's lease lapses but the sweeps step over its locked row (A
      stays running under epoch 1). Once the lock goes, A's heartbeats
      resume and A and B complete under epoch 1, neither with a
      run.requeued or run.fenced. (A FOR KEY SHARE under the FOR UPDATE,
      held until A's first heartbeat lands, keeps the sweeper from taking A
      in between, as it rightly could.)
  test_join_bounded_with_several_stuck_runs[refused|silent|rows_locked]
      three handlers never return, then the database refuses new
      connections and drops the pool's (``refused``: ALLOW_CONNECTIONS false,
      pg_terminate_backend), answers nothing
      any more (``silent``: a Proxy holds every byte and every new
      connection, as a hung server or a network cut would; a heartbeat
      hangs too), or another session holds the three runs' rows FOR UPDATE
      (``rows_locked``, until grace + 7 s): join() returns within grace +
      RELEASE_PATIENCE (3 s for all the releases together) + 1 s, without
      raising; the runs stay running (rows_locked: or queued, by a release
      that lands once the rows are free).
  test_end_tool_that_committed_but_lost_its_answer
      a Proxy drops the answer to the handler's end_tool once the server has
      sent it in full (ReadyForQuery: committed) and closes the connection:
      end_tool returns normally in the handler (its probe finds the call
      finished; no RQ004), the call is finished once under epoch 1 (one
      run.tool_finished), the run succeeds. Control: the same loss with
      end_tool sent again without the probe raises RQ004 (InvalidRunState)
      into the handler and fails the run.

  test_completion_that_committed_but_lost_its_answer[complete_and_claim|complete_many]
      the same loss for a run's completion, by either path (one place in the
      slot: complete_and_claim; two: complete_many): the pool asks get_run
      on a new connection and finds the run succeeded under its epoch, so it
      does not send the completion again (which would be refused and log a
      run.fenced); the run succeeded once under epoch 1 and on_finished was
      called once.

Three tests put a Proxy (a TCP relay, below) between the pool and the server.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from chaos_handlers import (
    ASYNC_HANDLERS,
    HANDLERS,
    NOTES,
    PROBES,
    Meeting,
    gate,
    open_gates,
)
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb
from runq import pool as runq_pool
from runq.pool import Slot, WorkerPool

LEASE = 1.5  # seconds; the pool heartbeats every third of it
POLL = 0.1
TERMINAL = ("succeeded", "failed", "cancelled")

_serial = itertools.count()


# -- waiting and describing ------------------------------------------------------------


def wait_until(what: str, predicate: Callable[[], Any], timeout: float,
               state: Callable[[], str] = lambda: "", every: float = 0.05) -> Any:
    """predicate()'s first truthy value; AssertionError naming ``what`` and
    ``state()`` when there is none within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}\n{state()}")
        time.sleep(every)


def sample(what: str, seconds: float, check: Callable[[], str | None],
           every: float = 0.1) -> None:
    """Run check() repeatedly for ``seconds``; it returns a problem or None,
    and the first problem fails the test."""
    began = time.monotonic()
    while True:
        problem = check()
        elapsed = time.monotonic() - began
        if problem:
            raise AssertionError(f"{what}: after {elapsed:.2f}s of {seconds:.1f}s: {problem}")
        if elapsed >= seconds:
            return
        time.sleep(every)


class Harness:
    """The test's view of one database and the pools it starts there."""

    def __init__(self, url: str, conn: psycopg.Connection[Any], name: str,
                 flavour: str) -> None:
        self.url = url
        self.conn = conn
        self.name = name  # prefix of this test's gates, notes and probe groups
        self.flavour = flavour  # "sync" or "async": which handlers its pools run
        self.pools: list[WorkerPool] = []
        self.joined: set[int] = set()

    def pool(self, slots: Sequence[Slot], *, lease: float = LEASE,
             sweep_interval: float | None = None, grace: float = 1.0,
             url: str | None = None, stop_grace: float = 5.0) -> WorkerPool:
        """A started pool on this database (through ``url``: a Proxy's)."""
        handlers = ASYNC_HANDLERS if self.flavour == "async" else HANDLERS
        pool = WorkerPool(url or self.url, handlers, slots, lease=timedelta(seconds=lease),
                          poll_interval=POLL, sweep_interval=sweep_interval, grace=grace,
                          worker_id=f"{self.name}-pool{len(self.pools)}",
                          stop_grace=stop_grace)
        self.pools.append(pool)
        pool.start()
        return pool

    def key(self, what: str) -> str:
        return f"{self.name}:{what}:{next(_serial)}"

    def submit(self, kind: str, priority: int, **payload: Any) -> int:
        row = self.conn.execute(
            "SELECT run_id FROM runq.submit('chaos', %s, %s, priority => %s)",
            [kind, Jsonb(payload), priority]).fetchone()
        assert row is not None
        return int(row[0])

    def value(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """The first column of the query's one row."""
        found = self.conn.execute(query, params).fetchone()
        assert found is not None, query
        return found[0]

    def row(self, run_id: int) -> dict[str, Any]:
        cur = self.conn.execute(
            """SELECT run_id, kind, status, lease_epoch, attempts, scheduled_for, failure,
                      result, lease_expires_at, heartbeat_at,
                      extract(epoch FROM lease_expires_at - now())::float8 AS lease_left,
                      extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age
                 FROM runq.runs WHERE run_id = %s""", [run_id])
        names = [d.name for d in cur.description or []]
        found = cur.fetchone()
        assert found is not None, f"run {run_id} does not exist"
        return dict(zip(names, found, strict=True))

    def lease_problem(self, run_id: int, pool: WorkerPool,
                      also: Sequence[int] = ()) -> str | None:
        """None while the run is running under its first epoch with a lease in
        the future; else what is wrong (with the state of it and ``also``)."""
        row = self.row(run_id)
        if (row["status"], row["lease_epoch"]) == ("running", 1) and row["lease_left"] > 0:
            return None
        return f"run {run_id} lost its lease:\n{self.state([run_id, *also], pool)}"

    def events(self, run_id: int) -> list[tuple[str, int]]:
        return [(t, e) for t, e in self.conn.execute(
            "SELECT type, epoch FROM runq.run_events(%s)", [run_id]).fetchall()]

    def state(self, run_ids: Iterable[int] | None = None, pool: WorkerPool | None = None) -> str:
        """Every run (or those given), for a failure message."""
        where = "" if run_ids is None else "WHERE run_id = ANY(%(ids)s)"
        rows = self.conn.execute(
            f"""SELECT run_id, kind, priority, status, lease_epoch, attempts,
                       round(extract(epoch FROM lease_expires_at - now())::numeric, 2),
                       round(extract(epoch FROM now() - heartbeat_at)::numeric, 2),
                       failure
                  FROM runq.runs {where} ORDER BY run_id""",
            {"ids": list(run_ids or [])}).fetchall()
        lines = ["run_id kind priority status epoch attempts lease_left heartbeat_age failure"]
        lines += [" ".join(str(v) for v in r) for r in rows]
        if pool is not None:
            lines.append(f"pool.inflight() = {pool.inflight()}; runq threads in this process: "
                         + ", ".join(sorted(t.name for t in threading.enumerate()
                                            if t.name.startswith("runq-"))))
        return "\n".join(lines)

    def wait_terminal(self, run_ids: Sequence[int], timeout: float,
                      pool: WorkerPool | None = None) -> dict[int, str]:
        """Wait until every run is terminal; {run_id: status}."""
        ids = list(run_ids)

        def done() -> dict[int, str] | None:
            rows = dict(self.conn.execute(
                "SELECT run_id, status FROM runq.runs WHERE run_id = ANY(%s)", [ids]).fetchall())
            return rows if all(rows.get(i) in TERMINAL for i in ids) else None

        statuses: dict[int, str] = wait_until(f"runs {ids} to be terminal", done, timeout,
                                              lambda: self.state(ids, pool))
        return statuses

    def wait_running(self, run_ids: Sequence[int], pool: WorkerPool,
                     timeout: float = 5.0) -> None:
        ids = list(run_ids)
        wait_until(f"runs {ids} to be running in the pool",
                   lambda: self.value(
                       "SELECT count(*) = %s FROM runq.runs"
                       " WHERE run_id = ANY(%s) AND status = 'running'",
                       [len(ids), ids]) and set(ids) <= set(pool.inflight()),
                   timeout, lambda: self.state(ids, pool))

    def stop_all(self) -> None:
        for pool in self.pools:
            pool.stop()
        for pool in self.pools:
            if id(pool) in self.joined:
                continue
            try:
                pool.join()
            except Exception as error:  # the test already failed or asserts on it
                print(f"pool.join() at teardown raised {type(error).__name__}: {error}")


@pytest.fixture(params=["sync", "async"])
def flavour(request: pytest.FixtureRequest) -> str:
    """Which twin of each handler the test's pools run (chaos_handlers.py)."""
    return str(request.param)


@pytest.fixture
def chaos(db_url: str, conn: psycopg.Connection[Any], flavour: str,
          request: pytest.FixtureRequest) -> Iterator[Harness]:
    h = Harness(db_url, conn, f"chaos-{request.node.name}", flavour)
    yield h
    open_gates(h.name)
    h.stop_all()


# A server's answer ends with ReadyForQuery; "I": idle, so the statement's
# implicit transaction has committed (or rolled back) by then.
_READY_IDLE = b"Z\x00\x00\x00\x05I"


class Proxy:
    """A TCP relay between a pool and the server, to lose the server in ways
    the server cannot be asked to. ``url`` is the server's URL through it.

    ``silence()``       from then on no connection, open or new, gets an
                        answer: a hung server, or a network cut (a connect
                        waits out connect_timeout, a query waits)
    ``cut_after(m)``    the answer to the next query whose bytes hold ``m``
                        is read to its end (ReadyForQuery: committed), then
                        dropped and both sides' sockets closed: a write that
                        committed and lost its answer on the way
    """

    def __init__(self, server_url: str) -> None:
        info = conninfo_to_dict(server_url)
        host, port = str(info.get("host") or "localhost"), int(info.get("port") or 5432)
        self._unix = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else None
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = make_conninfo(server_url, host="127.0.0.1", hostaddr="127.0.0.1",
                                 port=str(self._listener.getsockname()[1]))
        self._lock = threading.Lock()
        self._silent = threading.Event()
        self._closed = threading.Event()
        self._marker: bytes | None = None
        self._sockets: list[socket.socket] = []
        self.held = 0                     # chunks and connections silence() held back
        self.dropped: list[bytes] = []    # the answers cut_after() dropped
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def silence(self) -> None:
        self._silent.set()

    def cut_after(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            sockets, self._sockets = [self._listener, *self._sockets], []
        for sock in sockets:
            self._shut(sock)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes a recv() blocked on it
        sock.close()

    def _connect(self) -> socket.socket:
        if self._unix is None:
            return socket.create_connection(self._target)
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(self._unix)
        return sock

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            if self._silent.is_set():
                with self._lock:
                    self.held += 1  # accepted, never answered
                continue
            try:
                server = self._connect()
            except OSError:
                self._shut(client)
                continue
            self._track(server)
            link: dict[str, Any] = {"cut": False, "answer": b"", "tail": b""}
            for src, dst, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._relay, args=(src, dst, link, upstream),
                                 name="proxy-relay", daemon=True).start()

    def _relay(self, src: socket.socket, dst: socket.socket, link: dict[str, Any],
               upstream: bool) -> None:
        try:
            while not self._closed.is_set():
                data = src.recv(65536)
                if not data:
                    return
                if self._silent.is_set():
                    with self._lock:
                        self.held += 1
                    self._closed.wait()
                    return
                if upstream:
                    with self._lock:  # marked before it is sent: the answer comes after
                        seen, link["tail"] = link["tail"] + data, data[-64:]
                        if self._marker is not None and self._marker in seen:
                            link["cut"], self._marker = True, None
                elif link["cut"]:
                    link["answer"] += data
                    if link["answer"].endswith(_READY_IDLE):
                        with self._lock:
                            self.dropped.append(link["answer"])
                        return
                    continue
                dst.sendall(data)
        except OSError:
            return
        finally:
            self._shut(src)
            self._shut(dst)


@pytest.fixture
def proxy(db_url: str) -> Iterator[Proxy]:
    """A Proxy to the test's database; ask for it before ``chaos`` so the
    pools stop before it closes."""
    relay = Proxy(db_url)
    yield relay
    relay.close()


# -- the three checks after every scenario ----------------------------------------------


def after_checks(h: Harness, pool: WorkerPool, slots: Sequence[tuple[int, ...]],
                 expected_failed: dict[int, str], lease: float = LEASE) -> None:
    """(a) every slot in ``slots`` (one class tuple per slot thread) claims;
    (b) no running run without a live heartbeat; (c) exactly these failures."""
    # (a) one probe per slot, in that slot's first class; they meet at a
    # barrier, so each one is held by a slot of its own at the same time.
    group = h.key("probe")
    PROBES[group] = Meeting(len(slots))
    probes = [h.submit("probe", classes[0], group=group) for classes in slots]
    statuses = h.wait_terminal(probes, timeout=15, pool=pool)
    assert all(s == "succeeded" for s in statuses.values()), (
        f"(a) not every slot claimed a fresh run: {statuses}\n{h.state(probes, pool)}")
    holders = {h.row(p)["result"]["holder"] for p in probes}
    assert len(holders) == len(slots), f"(a) probes ran on {holders}, not {len(slots)} slots"

    # (b) every running run has a live lease and is the pool's.
    def unheartbeated() -> str | None:
        before = set(pool.inflight())
        rows = h.conn.execute(
            """SELECT run_id, now() - heartbeat_at < %(lease)s, lease_expires_at > now(),
                      round(extract(epoch FROM now() - heartbeat_at)::numeric, 2),
                      round(extract(epoch FROM lease_expires_at - now())::numeric, 2)
                 FROM runq.runs WHERE status = 'running'""",
            {"lease": timedelta(seconds=lease)}).fetchall()
        inflight = before | set(pool.inflight())
        bad = [f"run {r}: heartbeat {age}s ago, lease {left}s left, in inflight {r in inflight}"
               for r, recent, leased, age, left in rows
               if not (recent and leased and r in inflight)]
        return "; ".join(bad) or None

    sample("(b) a run is running without a live heartbeat", lease, unheartbeated, every=0.25)

    # (c) the dead letter holds exactly what the scenario expects.
    failed = dict(h.conn.execute(
        "SELECT run_id, failure ->> 'code' FROM runq.runs WHERE status = 'failed'").fetchall())
    assert failed == expected_failed, (
        f"(c) failed runs {failed}, expected {expected_failed}\n{h.state(pool=pool)}")


def left_behind_at_join(h: Harness, note: str) -> None:
    """What a "waits" handler still in flight at stop() has noted once join()
    returned: nothing for a sync one (its thread blocks on; nothing can stop
    it), "cancelled" for an async one (the pool cancels its task after the
    releases)."""
    seen = [what for what, _ in NOTES.get(note, [])]
    expected = ["cancelled"] if h.flavour == "async" else []
    assert seen == expected, (
        f"the {h.flavour} handler left in flight noted {NOTES.get(note)} by the end of join(),"
        f" expected {expected}")


def stop_and_join(h: Harness, pool: WorkerPool) -> tuple[BaseException | None, float]:
    """stop() then join(): what join() raised, if anything, and how long both took."""
    began = time.monotonic()
    pool.stop()
    try:
        pool.join()
        return None, time.monotonic() - began
    except BaseException as error:
        return error, time.monotonic() - began
    finally:
        h.joined.add(id(pool))


# -- 1. a result JSON cannot encode ------------------------------------------------------


@pytest.mark.parametrize(("kind", "named"), [("returns.set", ("set",)),
                                             ("returns.nan", ("nan", "float"))],
                         ids=["set", "nan"])
def test_result_not_json(chaos: Harness, kind: str, named: tuple[str, ...]) -> None:
    h = chaos
    pool = h.pool([Slot((40,), 1)])
    run = h.submit(kind, 40)
    h.wait_terminal([run], timeout=5, pool=pool)
    row = h.row(run)
    assert row["status"] == "failed", h.state([run], pool)
    assert row["failure"]["code"] == "result_not_json", row["failure"]
    message = row["failure"]["message"].lower()
    assert any(word in message for word in named), (
        f"the message names neither of {named}: {row['failure']}")
    after_checks(h, pool, [(40,)], {run: "result_not_json"})


# -- 2. a BaseException that is not KeyboardInterrupt or SystemExit -------------------------


@pytest.mark.parametrize(("kind", "code", "message"), [
    ("raises.boom", "Boom", "the handler blew up"),
    ("raises.generator_exit", "GeneratorExit", "the generator was closed under the handler"),
], ids=["Boom", "GeneratorExit"])
def test_base_exception(chaos: Harness, kind: str, code: str, message: str) -> None:
    h = chaos
    pool = h.pool([Slot((41,), 1)])
    run = h.submit(kind, 41)
    h.wait_terminal([run], timeout=5, pool=pool)
    row = h.row(run)
    assert row["status"] == "failed", h.state([run], pool)
    assert row["failure"]["code"] == code, row["failure"]
    assert message in row["failure"]["message"], row["failure"]
    after_checks(h, pool, [(41,)], {run: code})


# -- 3. a handler that never returns -------------------------------------------------------


@pytest.mark.parametrize("connections", ["release", "no_connection"])
def test_handler_that_never_returns(chaos: Harness, server_url: str, connections: str) -> None:
    h = chaos
    grace = 1.0
    pool = h.pool([Slot((30,), 1), Slot((31,), 2)], sweep_interval=0.3, grace=grace)
    stuck_gate, stuck_note = h.key("stuck"), h.key("stuck-note")
    stuck = h.submit("waits", 30, gate=stuck_gate, note=stuck_note)
    h.wait_running([stuck], pool)
    first_lease = h.row(stuck)["lease_expires_at"]

    # The other slots go on claiming and completing.
    others = [h.submit("quick", 31) for _ in range(6)]
    statuses = h.wait_terminal(others, timeout=5, pool=pool)
    assert set(statuses.values()) == {"succeeded"}, h.state(others, pool)

    # The stuck run's lease moves on, past several lease lengths, never lapsing.
    def lease_moved_on() -> bool:
        problem = h.lease_problem(stuck, pool)
        assert problem is None, f"the stuck run: {problem}"
        return bool(h.row(stuck)["lease_expires_at"] > first_lease + timedelta(seconds=3 * LEASE))

    wait_until("the stuck run's lease to move past 3 lease lengths", lease_moved_on,
               6 * LEASE, lambda: h.state([stuck], pool), every=0.1)

    after_checks(h, pool, [(31,), (31,)], {})

    admin = psycopg.connect(server_url, autocommit=True)
    dbname = sql.Identifier(h.conn.info.dbname)
    try:
        if connections == "no_connection":
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(dbname))
        raised, took = stop_and_join(h, pool)
    finally:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(dbname))
        admin.close()
    assert raised is None, f"pool.join() raised {type(raised).__name__}: {raised}"
    assert took < grace + 5, f"pool.join() took {took:.1f}s (grace {grace}s)"

    if connections == "release":
        row = h.row(stuck)
        assert (row["status"], row["attempts"], row["scheduled_for"]) == ("queued", 0, None), (
            f"the stuck run was not released\n{h.state([stuck])}")
    left_behind_at_join(h, stuck_note)
    # Let a sync handler end; a released run's late return writes nothing.
    gate(stuck_gate).set()
    wait_until("the stuck handler to return", lambda: NOTES.get(stuck_note), timeout=5)
    if connections == "release":
        wait_until("the stuck run to leave pool.inflight()", lambda: not pool.inflight(), 2)
        row = h.row(stuck)
        assert row["status"] == "queued", h.state([stuck])
        assert [t for t, _ in h.events(stuck)][-1] == "run.requeued", h.events(stuck)


# -- 4. a run purged under a live worker ---------------------------------------------------


def test_purged_run_under_live_worker(chaos: Harness) -> None:
    h = chaos
    # No sweeper: only the test moves A along. A's gate opens three lease
    # lengths after A is purged: an async A must not be cancelled before.
    pool = h.pool([Slot((50,), 2)], stop_grace=30.0)
    a_gate, a_note, b_gate = h.key("a"), h.key("a-note"), h.key("b")
    a = h.submit("waits.then_checkpoints", 50, gate=a_gate, note=a_note)
    h.wait_running([a], pool)
    b = h.submit("waits", 50, gate=b_gate)
    h.wait_running([a, b], pool)

    # In one transaction, so the pool's heartbeat of A (epoch 1) meets either
    # the run as it held it or no run at all: expire, sweep (requeued), claim
    # (epoch 2), complete and purge A. Both slots are busy meanwhile.
    with h.conn.transaction():
        h.conn.execute("UPDATE runq.runs SET lease_expires_at = now() - interval '1 s'"
                       " WHERE run_id = %s", [a])
        swept = h.conn.execute("SELECT run_id, action FROM runq.sweep()").fetchall()
        assert swept == [(a, "requeued")], swept
        h.conn.execute("UPDATE runq.runs SET scheduled_for = NULL WHERE run_id = %s", [a])
        claimed = h.conn.execute(
            "SELECT run_id, epoch FROM runq.claim(ARRAY[50], 'chaos-test')").fetchall()
        assert claimed == [(a, 2)], claimed
        assert h.value("SELECT runq.complete(%s, 2, '{\"by\": \"test\"}')", [a]) is True
        purged = h.conn.execute("SELECT runq.purge(interval '0 seconds', 1000, true)").fetchone()
        assert purged == (1,), purged
    assert h.value("SELECT count(*) FROM runq.runs WHERE run_id = %s", [a]) == 0

    # B keeps its lease: the heartbeater survived A's RQ003.
    sample("B's lease after A was purged", 3 * LEASE, lambda: h.lease_problem(b, pool))
    wait_until("A to leave pool.inflight()", lambda: a not in pool.inflight(), LEASE,
               lambda: h.state(pool=pool))

    # A's handler learns at its next write that the run is gone.
    gate(a_gate).set()
    seen = wait_until("A's handler to write", lambda: NOTES.get(a_note), timeout=5)
    assert seen[0][1] == "RunStopped", (
        f"A's handler saw (stop_requested, its checkpoint's outcome) = {seen}")

    gate(b_gate).set()
    assert h.wait_terminal([b], timeout=5, pool=pool) == {b: "succeeded"}
    assert not {"run.fenced", "run.requeued"} & {t for t, _ in h.events(b)}, h.events(b)
    assert h.value("SELECT count(*) FROM runq.runs WHERE run_id = %s", [a]) == 0, "A came back"
    after_checks(h, pool, [(50,), (50,)], {})


# -- 5. a checkpoint stalled by a lock ------------------------------------------------------


def test_checkpoint_stalled_by_lock_keeps_other_leases(
        chaos: Harness, connect: Callable[[], psycopg.Connection[Any]]) -> None:
    h = chaos
    pool = h.pool([Slot((60,), 2)], sweep_interval=0.3)  # a lapsed lease gets swept
    a_gate, a_note, b_gate = h.key("a"), h.key("a-note"), h.key("b")
    a = h.submit("waits.then_checkpoints", 60, gate=a_gate, note=a_note)
    b = h.submit("waits", 60, gate=b_gate)
    h.wait_running([a, b], pool)

    locker = connect()
    with locker.transaction():
        locker.execute("LOCK TABLE runq.checkpoints IN EXCLUSIVE MODE")
        gate(a_gate).set()
        wait_until("A's checkpoint to wait on the lock", lambda: h.value(
            """SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'
                  AND query LIKE '%runq%checkpoint%'"""), timeout=5)
        sample("B's lease while A's checkpoint is stalled", 3 * LEASE,
               lambda: h.lease_problem(b, pool, also=[a]))
    # The lock is gone: A's stalled checkpoint lands, A completes, all under epoch 1.
    assert h.wait_terminal([a], timeout=5, pool=pool) == {a: "succeeded"}
    assert NOTES.get(a_note) == [(False, "written")], NOTES.get(a_note)
    a_events = h.events(a)
    assert ("run.checkpointed", 1) in a_events and a_events[-1] == ("run.succeeded", 1), (
        f"A's stalled checkpoint did not land under epoch 1 (its lease lapsed meanwhile?):"
        f" {a_events}")
    gate(b_gate).set()
    assert h.wait_terminal([b], timeout=5, pool=pool) == {b: "succeeded"}
    assert not {"run.fenced", "run.requeued"} & {t for t, _ in h.events(b)}, h.events(b)
    after_checks(h, pool, [(60,), (60,)], {})


# -- 6. the database restarted mid-run ------------------------------------------------------


def test_database_restart_mid_run(private_cluster: tuple[str, Callable[[], None]],
                                  flavour: str, request: pytest.FixtureRequest) -> None:
    url, restart = private_cluster
    lease = 3.0
    h = Harness(url, psycopg.connect(url, autocommit=True), f"chaos-{request.node.name}",
                flavour)
    try:
        # No sweeper: the runs must get through on their first lease, however
        # long the restart keeps the heartbeats away.
        pool = h.pool([Slot((10,), 3)], lease=lease)
        pause = h.key("pause")
        runs = [h.submit("pauses", 10, gate=pause) for _ in range(3)]
        wait_until("every run to checkpoint and pause", lambda: h.value(
            "SELECT count(DISTINCT run_id) = 3 FROM runq.checkpoints WHERE run_id = ANY(%s)",
            [runs]) and set(runs) <= set(pool.inflight()), timeout=5,
            state=lambda: h.state(runs, pool))

        restart()
        h.conn.close()
        h.conn = psycopg.connect(url, autocommit=True)

        def all_heartbeating() -> bool:
            return bool(h.value(
                "SELECT bool_and(status = 'running' AND heartbeat_at > pg_postmaster_start_time()"
                " AND lease_expires_at > now()) FROM runq.runs WHERE run_id = ANY(%s)",
                [runs]))

        wait_until("heartbeats of every paused run after the restart", all_heartbeating,
                   timeout=2 * lease, state=lambda: h.state(runs, pool))

        gate(pause).set()  # each handler checkpoints again, then returns
        statuses = h.wait_terminal(runs, timeout=10, pool=pool)
        assert set(statuses.values()) == {"succeeded"}, h.state(runs, pool)
        for run in runs:
            kinds = [t for t, _ in h.events(run)]
            assert kinds.count("run.succeeded") == 1, (run, h.events(run))
            assert h.row(run)["result"] == {"epoch": 1}, h.row(run)
            assert h.value("SELECT count(*) FROM runq.checkpoints WHERE run_id = %s",
                           [run]) == 2, (run, "checkpoints")
        after_checks(h, pool, [(10,)] * 3, {}, lease=lease)
    finally:
        open_gates(h.name)
        h.stop_all()
        h.conn.close()


# -- 7. a kind with no handler queued ahead of a handled one ---------------------------------


def test_unknown_kind_ahead_of_handled_kind(chaos: Harness) -> None:
    h = chaos
    unknown = [h.submit("unknown.kind", 70) for _ in range(3)]
    handled = [h.submit("quick", 70) for _ in range(3)]
    pool = h.pool([Slot((70,), 2)])
    statuses = h.wait_terminal(handled, timeout=5, pool=pool)
    assert set(statuses.values()) == {"succeeded"}, h.state(pool=pool)

    def never_claimed() -> None:
        rows = {r: h.row(r) for r in unknown}
        seen = {r: (row["status"], row["attempts"], row["lease_epoch"]) for r, row in rows.items()}
        assert seen == {r: ("queued", 0, 0) for r in unknown}, (
            f"runs of a kind without a handler were claimed: {seen}\n{h.state(pool=pool)}")

    never_claimed()
    after_checks(h, pool, [(70,), (70,)], {})
    never_claimed()


# -- 8. a handler raises SystemExit or KeyboardInterrupt -------------------------------------


@pytest.mark.parametrize("exception", ["SystemExit", "KeyboardInterrupt"])
def test_interrupt_in_handler_stops_the_pool(chaos: Harness, exception: str) -> None:
    h = chaos
    grace = 1.0
    pool = h.pool([Slot((42,), 2)], sweep_interval=0.3, grace=grace)
    other_gate, other_note = h.key("other"), h.key("other-note")
    other = h.submit("waits", 42, gate=other_gate, note=other_note)
    h.wait_running([other], pool)

    # The test never calls stop(): the handler's exception must.
    joined = threading.Event()
    raised: list[BaseException] = []

    def join() -> None:
        try:
            pool.join()
        except BaseException as error:
            raised.append(error)
        finally:
            joined.set()

    threading.Thread(target=join, name="test-join", daemon=True).start()
    began = time.monotonic()
    run = h.submit("interrupts.once", 42, **{"raise": exception})
    assert joined.wait(grace + 3), (
        f"the pool did not stop by itself within grace + 3 s of a handler raising {exception}"
        f"\n{h.state([run, other], pool)}")
    took = time.monotonic() - began
    h.joined.add(id(pool))
    assert not raised, f"pool.join() raised {raised[0]!r}"

    # Both runs given back ('resume': queued, attempt returned, claimable at
    # once): the one that raised at once, the other after its grace.
    for r in (run, other):
        row = h.row(r)
        assert (row["status"], row["attempts"], row["scheduled_for"], row["lease_epoch"]) == (
            "queued", 0, None, 1), f"run {r} was not released ({took:.1f}s)\n{h.state([r])}"
        assert h.events(r)[-1] == ("run.requeued", 1), h.events(r)
    assert h.value("SELECT count(*) FROM runq.runs WHERE status = 'failed'") == 0, h.state()

    # The other handler's late return (sync) writes nothing; then a new pool
    # claims and completes both released runs.
    left_behind_at_join(h, other_note)
    gate(other_gate).set()
    wait_until("the other handler to return", lambda: NOTES.get(other_note), timeout=5)
    assert h.row(other)["status"] == "queued", h.state([other])
    fresh = h.pool([Slot((42,), 2)], sweep_interval=0.3, grace=grace)
    statuses = h.wait_terminal([run, other], timeout=5, pool=fresh)
    assert statuses == {run: "succeeded", other: "succeeded"}, h.state([run, other], fresh)
    assert h.row(run)["result"] == {"epoch": 2}, h.row(run)
    assert [t for t, _ in h.events(run)].count("run.succeeded") == 1, h.events(run)
    after_checks(h, fresh, [(42,), (42,)], {})


# -- 9. a run's row locked by another session ------------------------------------------------


def test_row_locked_by_another_session_keeps_other_leases(
        chaos: Harness, connect: Callable[[], psycopg.Connection[Any]]) -> None:
    h = chaos
    interval = LEASE / 3  # the pool's heartbeat interval; each carries a lock timeout of a quarter
    pool = h.pool([Slot((80,), 2)], sweep_interval=0.3)  # a lapsed, unlocked lease gets swept
    a_gate, b_gate = h.key("a"), h.key("b")
    a = h.submit("waits", 80, gate=a_gate)
    h.wait_running([a], pool)
    b = h.submit("waits", 80, gate=b_gate)  # after A, so B's heartbeat comes after A's
    h.wait_running([a, b], pool)

    waited: list[float] = []  # how long heartbeats had been waiting on A's row, when seen

    def check() -> str | None:
        problem = h.lease_problem(b, pool, also=[a])
        if problem:
            return problem
        row = h.row(a)
        if (row["status"], row["lease_epoch"]) != ("running", 1):
            return f"A was swept while its row was locked:\n{h.state([a, b], pool)}"
        age = h.value("""SELECT max(extract(epoch FROM clock_timestamp() - query_start))::float8
                           FROM pg_stat_activity
                          WHERE datname = current_database() AND wait_event_type = 'Lock'
                            AND application_name = 'runq-pool-heartbeat'""")
        if age is not None:
            waited.append(age)
            if age > interval:
                return (f"a heartbeat has waited {age:.2f}s on A's row, more than the heartbeat"
                        f" interval ({interval:.2f}s)")
        return None

    # The locker's FOR UPDATE is in a savepoint over a FOR KEY SHARE of the
    # same row, which lets heartbeats through (they change no key) but not
    # sweeps (FOR UPDATE): when the FOR UPDATE goes, a sweep cannot take A,
    # whose lease lapsed, before its next heartbeat lands (it rightly would).
    locker = connect()
    locker.execute("BEGIN")
    try:
        locker.execute("SELECT run_id FROM runq.runs WHERE run_id = %s FOR KEY SHARE", [a])
        locker.execute("SAVEPOINT hold")
        locker.execute("SELECT run_id FROM runq.runs WHERE run_id = %s FOR UPDATE", [a])
        sample("B's lease and A's row while another session holds A's row locked", 3 * LEASE,
               check, every=0.05)
        assert waited, "no heartbeat of A was seen waiting on its row lock"
        assert h.row(a)["lease_left"] < 0, (
            f"A's lease did not lapse under the lock (its heartbeats got through?)\n"
            f"{h.state([a, b], pool)}")
        locker.execute("ROLLBACK TO SAVEPOINT hold")  # the FOR UPDATE goes
        # A's heartbeats resume.
        wait_until("A's heartbeat after the lock went", lambda: h.lease_problem(a, pool) is None,
                   timeout=2 * interval, state=lambda: h.state([a, b], pool))
        locker.execute("COMMIT")
    finally:
        if locker.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            locker.execute("ROLLBACK")

    # A's heartbeats go on, and it completes under its first epoch.
    sample("A's lease after the lock went", LEASE, lambda: h.lease_problem(a, pool, also=[b]))
    gate(a_gate).set()
    gate(b_gate).set()
    assert h.wait_terminal([a, b], timeout=5, pool=pool) == {a: "succeeded", b: "succeeded"}
    for r in (a, b):
        events = h.events(r)
        assert events[-1] == ("run.succeeded", 1), (r, events)
        assert not {"run.fenced", "run.requeued"} & {t for t, _ in events}, (r, events)
    after_checks(h, pool, [(80,), (80,)], {})


# -- 10. join() with the database gone and several runs stuck ---------------------------------


@pytest.mark.parametrize("outage", ["refused", "silent", "rows_locked"])
def test_join_bounded_with_several_stuck_runs(
        proxy: Proxy, chaos: Harness, server_url: str,
        connect: Callable[[], psycopg.Connection[Any]], outage: str) -> None:
    h = chaos
    grace = 1.0
    patience = getattr(runq_pool, "RELEASE_PATIENCE", 3.0)  # 3 s, as docs/guides/python.md says
    pool = h.pool([Slot((33,), 3)], grace=grace, url=proxy.url if outage == "silent" else None)
    stuck_gate = h.key("stuck")
    stuck = [h.submit("waits", 33, gate=stuck_gate) for _ in range(3)]
    h.wait_running(stuck, pool)

    admin = psycopg.connect(server_url, autocommit=True)
    dbname = sql.Identifier(h.conn.info.dbname)
    locker = connect()
    # rows_locked: the locks go well after join() should have returned, so a
    # join() that waits for them ends, late, instead of hanging the test.
    unlock = threading.Timer(grace + patience + 4, lambda: locker.execute("COMMIT"))
    try:
        if outage == "refused":
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(dbname))
            # and the connections the pool holds are gone too
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = %s AND application_name LIKE 'runq-pool%%'",
                          [h.conn.info.dbname])
        elif outage == "silent":
            proxy.silence()
            # the next heartbeat hangs too
            wait_until("a heartbeat to hang", lambda: proxy.held, timeout=2 * LEASE)
        else:
            locker.execute("BEGIN")
            locker.execute("SELECT FROM runq.runs WHERE run_id = ANY(%s) FOR UPDATE", [stuck])
            unlock.start()
        raised, took = stop_and_join(h, pool)
    finally:
        unlock.cancel()
        if unlock.ident is not None:
            unlock.join()
        if locker.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            locker.execute("ROLLBACK")
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(dbname))
        admin.close()
    assert raised is None, f"pool.join() raised {type(raised).__name__}: {raised}"
    assert took < grace + patience + 1.0, (
        f"pool.join() took {took:.1f}s with {len(stuck)} runs stuck (grace {grace}s, then"
        f" {patience}s to release them in all)")
    # Nothing could be released in time: the runs wait for their leases to
    # lapse, or (rows_locked) a release join() stopped waiting for lands once
    # the rows are free, in the background (released: queued again). Never
    # anything else.
    statuses = {h.row(r)["status"] for r in stuck}
    assert statuses <= ({"running", "queued"} if outage == "rows_locked" else {"running"}), \
        h.state(stuck)


# -- 11. a write that committed and lost its answer -----------------------------------------


def test_end_tool_that_committed_but_lost_its_answer(proxy: Proxy, chaos: Harness) -> None:
    h = chaos
    pool = h.pool([Slot((91,), 1)], url=proxy.url)
    end_tool = b'"end_tool"('  # in the query text the client sends

    # The answer to end_tool is lost after it committed: end_tool asks
    # tool_calls on a new connection, finds its call finished, and returns.
    proxy.cut_after(end_tool)
    note = h.key("note")
    run = h.submit("uses.tool", 91, note=note, call_id="search-1")
    seen = wait_until("the handler's end_tool to return or raise", lambda: NOTES.get(note),
                      timeout=10, state=lambda: h.state([run], pool))
    assert seen == ["written"], f"end_tool raised {seen} into the handler"
    assert len(proxy.dropped) == 1 and proxy.dropped[0].endswith(_READY_IDLE), proxy.dropped
    assert h.wait_terminal([run], timeout=5, pool=pool) == {run: "succeeded"}, h.state([run])
    calls = h.conn.execute("SELECT call_id, status, epoch, outcome FROM runq.tool_calls(%s)",
                           [run]).fetchall()
    assert calls == [("search-1", "finished", 1, {"hits": 3})], calls
    kinds = [t for t, _ in h.events(run)]
    assert kinds.count("run.tool_finished") == 1, h.events(run)
    assert "run.fenced" not in kinds and h.events(run)[-1] == ("run.succeeded", 1), h.events(run)

    # The same loss without the probe: end_tool sent again raises RQ004 into
    # the handler, and the run fails. What the probe is there for.
    proxy.cut_after(end_tool)
    unprobed_note = h.key("unprobed-note")
    unprobed = h.submit("uses.tool", 91, note=unprobed_note, call_id="search-1", probe=False)
    seen = wait_until("the unprobed end_tool to return or raise",
                      lambda: NOTES.get(unprobed_note), timeout=10,
                      state=lambda: h.state([unprobed], pool))
    assert seen == ["InvalidRunState"], f"end_tool sent again met {seen}, not RQ004"
    assert len(proxy.dropped) == 2, proxy.dropped
    assert h.wait_terminal([unprobed], timeout=5, pool=pool) == {unprobed: "failed"}
    after_checks(h, pool, [(91,)], {unprobed: "InvalidRunState"})


@pytest.mark.parametrize("path", ["complete_and_claim", "complete_many"])
def test_completion_that_committed_but_lost_its_answer(proxy: Proxy, chaos: Harness,
                                                       path: str) -> None:
    h = chaos
    # One place in the slot: a lone completion fills it and claims with it
    # (complete_and_claim); two: it goes through complete_many.
    pool = h.pool([Slot((91,), 1 if path == "complete_and_claim" else 2)], url=proxy.url)
    proxy.cut_after(b'"complete_and_claim"(' if path == "complete_and_claim"
                    else b"runq.complete_many(")
    finished: list[tuple[int, int, str]] = []
    pool.on_finished = lambda run_id, epoch, status: finished.append((run_id, epoch, status))
    run = h.submit("quick", 91)
    assert h.wait_terminal([run], timeout=10, pool=pool) == {run: "succeeded"}, h.state([run])
    wait_until("the pool to acknowledge the run's end", lambda: finished, timeout=5,
               state=lambda: h.state([run], pool))
    assert len(proxy.dropped) == 1 and proxy.dropped[0].endswith(_READY_IDLE), proxy.dropped
    events = h.events(run)
    kinds = [t for t, _ in events]
    # Sent again without asking, the completion would be refused: run.fenced.
    assert "run.fenced" not in kinds and kinds.count("run.succeeded") == 1, events
    assert events[-1] == ("run.succeeded", 1), events
    assert finished == [(run, 1, "succeeded")], finished
    after_checks(h, pool, [(91,)], {})
