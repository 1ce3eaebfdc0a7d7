"""A worker pool: slots per class set, heartbeats, wake-ups, sweeps, shutdown.

Capacity is reserved by declaring slots per class set, for example::

    pool = WorkerPool(url, handlers, slots=[([0], 2), ([0, 10], 4), ([20], 1)])

Two slots claim only interactive runs, so an interactive run never waits
behind async work; four take interactive or async; one does maintenance.
Each slot is a thread with its own connection that claims one run at a time,
of the kinds it has handlers for only (a rolling deploy never hands a new kind
to an old worker), and runs that kind's handler with a RunContext.

The pool keeps no queue logic: every write is one fenced runq function, and
the first one that says ``false`` (or a heartbeat that does) stops the run:
the context raises RunStopped from then on and the pool writes nothing more
for that run. A handler that returns completes the run with its return value;
one that raises fails it with the exception's class and message; a return
value jsonb cannot hold fails it with code ``result_not_json``.

Nothing stops a thread of the pool: an error about one run ends the handling
of that run only, any other error is logged and the thread carries on after a
pause. A write that loses its connection (a server restart, a terminated
backend) is sent again on a new one for up to a lease; fencing makes that
safe. One heartbeat thread extends every in-flight run's lease; it never waits
for a run's own write, and a run whose row another session holds locked costs
it at most a lock timeout.

Idle slots wake on ``LISTEN runq`` and poll every ``poll_interval`` seconds
in any case (a PgBouncer in transaction mode drops notifications). A timer
thread sweeps. ``stop()`` (SIGTERM or SIGINT under ``run()``) stops claiming,
gives in-flight handlers ``grace`` seconds, then releases the runs still in
flight with ``runq.release``, which follows each run's recovery policy. A
handler that raises SystemExit or KeyboardInterrupt gives its run back the
same way and stops the pool.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar, cast

import psycopg

from runq.client import Client
from runq.errors import RunNotFound
from runq.types import ClaimedRun, ToolCall

__all__ = ["Handler", "RunContext", "RunStopped", "Slot", "WorkerPool", "main"]

log = logging.getLogger("runq.pool")

T = TypeVar("T")

# How long join() goes on trying to release the runs left after the grace
# period (a database that is gone cannot take them back; their leases expire).
RELEASE_PATIENCE = 3.0

# A heartbeat waits at most this long for a run's row that another session
# holds locked, so one locked run never holds up the heartbeats of the rest.
# Set for that one statement only (set_config(..., true)): safe behind
# PgBouncer in transaction mode, where a SET would stay on the server
# connection for whichever client comes next.
_HEARTBEAT = """SELECT runq.heartbeat(%(run_id)s, %(epoch)s)
  FROM (SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS lock_timeout) AS s
 WHERE s.lock_timeout IS NOT NULL"""


class RunStopped(Exception):
    """The run is no longer this worker's (fenced, cancelled, released,
    purged): stop working on it. The pool writes nothing more for it."""


class _Link:
    """One thread's connection: opened on first use, and again after it broke."""

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any]) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._conn: psycopg.Connection[Any] | None = None

    @property
    def lost(self) -> bool:
        return self._conn is None or self._conn.closed or self._conn.broken

    def connection(self) -> psycopg.Connection[Any]:
        if self.lost:
            self.close()
            self._conn = psycopg.connect(self._conninfo, autocommit=True, **self._kwargs)
        assert self._conn is not None
        return self._conn

    def client(self) -> Client:
        return Client(self.connection())

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken: nothing to give back
                log.debug("closing a broken connection failed", exc_info=True)


def _persist(link: _Link, call: Callable[[Client], T], patience: float,
             landed: Callable[[Client], bool] | None = None) -> T:
    """``call`` on the link's connection; sent again on a new connection for
    up to ``patience`` seconds while the connection is what failed. An error
    of the statement itself (the connection is fine) is raised at once.

    A call whose connection broke after it was sent may have committed.
    Sending a fenced write again is safe (it applies once, or answers false),
    but not always quiet: ``landed``, when given, asks the database first
    whether the lost call took effect, and then the call is not sent again."""
    deadline = time.monotonic() + patience
    pause = 0.05
    sent = False
    while True:
        try:
            client = link.client()
            if sent and landed is not None and landed(client):
                return cast(T, True)
            sent = True
            return call(client)
        except psycopg.Error as error:
            if not link.lost or time.monotonic() >= deadline:
                raise
            log.warning("lost the database (%s); trying again", error)
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 1.0)


class RunContext:
    """What a handler gets: the claimed run and its fenced writes.

    Every write raises RunStopped instead of returning ``false``, so a
    handler cannot carry on by accident after losing its run. Long
    computations between writes can poll ``stop_requested``.
    """

    def __init__(self, link: _Link, run: ClaimedRun, lease: timedelta) -> None:
        self.run = run
        self._link = link
        self._patience = lease.total_seconds()
        # Guards the flags below and is never held during a round trip: a
        # heartbeat never waits for this run's write, nor a write for a
        # heartbeat, except the last write (see _write).
        self._lock = threading.Condition()
        self._stopped = False
        self._finishing = False   # the last write is under way, or done
        self._beating = False     # a heartbeat is under way

    @property
    def run_id(self) -> int:
        return self.run.run_id

    @property
    def epoch(self) -> int:
        return self.run.epoch

    @property
    def stop_requested(self) -> bool:
        """True once the run is no longer ours; every write then raises."""
        return self._stopped

    @property
    def _done(self) -> bool:
        return self._stopped or self._finishing

    def _stop(self) -> None:
        with self._lock:
            self._stopped = True

    def _write(self, call: Callable[[Client], bool], *, final: bool = False,
               link: _Link | None = None, patience: float | None = None,
               landed: Callable[[Client], bool] | None = None) -> None:
        link = link or self._link
        patience = self._patience if patience is None else patience
        with self._lock:
            if self._done:
                raise RunStopped(f"run {self.run_id} epoch {self.epoch} is no longer ours")
            if final:
                # The last write waits out a heartbeat already sent, so that
                # heartbeat cannot land after it and log run.fenced.
                self._finishing = True
                # Bounded: a heartbeat stuck on a dead socket ends at the
                # connection's tcp_user_timeout anyway.
                self._lock.wait_for(lambda: not self._beating, timeout=patience)
        try:
            applied = _persist(link, call, patience, landed)
        except RunNotFound:
            self._stop()
            raise RunStopped(f"run {self.run_id} no longer exists") from None
        except BaseException:
            with self._lock:
                # A write that raised did not change the run (bad argument,
                # a value jsonb refuses): the handler, or the pool, may write
                # again. Unless the database stayed out of reach for a whole
                # lease: then the run is most likely no longer ours.
                self._finishing = self._finishing and not final
                self._stopped = self._stopped or link.lost
            raise
        if not applied:
            self._stop()
            raise RunStopped(f"run {self.run_id} epoch {self.epoch} was fenced or cancelled")

    def checkpoint(self, state: Any) -> None:
        self._write(lambda c: c.checkpoint(self.run_id, self.epoch, state))

    def begin_turn(self) -> None:
        self._write(lambda c: c.begin_turn(self.run_id, self.epoch))

    def begin_tool(self, call_id: str, tool: str, idempotency: str,
                   args: Mapping[str, Any] | None = None) -> None:
        self._write(lambda c: c.begin_tool(self.run_id, self.epoch, call_id, tool,
                                           idempotency, args))

    def end_tool(self, call_id: str, outcome: Any) -> None:
        # Sent again after it committed, end_tool would raise RQ004 (the call
        # is finished): ask first.
        def landed(c: Client) -> bool:
            return any(t.call_id == call_id and t.status == "finished" and t.epoch == self.epoch
                       for t in c.tool_calls(self.run_id))
        self._write(lambda c: c.end_tool(self.run_id, self.epoch, call_id, outcome),
                    landed=landed)

    def tool_calls(self) -> list[ToolCall]:
        """The run's tool calls: which are retryable, which uncertain."""
        return _persist(self._link, lambda c: c.tool_calls(self.run_id), self._patience)

    def ask_user(self, question: Any) -> None:
        """Wait for the user; the handler should return after this."""
        self._write(lambda c: c.ask_user(self.run_id, self.epoch, question), final=True)

    def complete(self, result: Any = None) -> None:
        self._write(lambda c: c.complete(self.run_id, self.epoch, result), final=True)

    def fail(self, code: str, message: str | None = None, **details: Any) -> None:
        failure = {"code": code, **({"message": message} if message else {}), **details}
        self._write(lambda c: c.fail(self.run_id, self.epoch, failure), final=True)

    def _release(self, link: _Link | None = None, patience: float | None = None) -> None:
        """Give the run back (shutdown): the last write, from the pool, on
        ``link`` when the slot's own connection may still be busy."""
        self._write(lambda c: c.release(self.run_id, self.epoch), final=True, link=link,
                    patience=patience)

    def _heartbeat(self, conn: psycopg.Connection[Any], lock_timeout: str) -> None:
        with self._lock:
            if self._done:
                return
            # Sent even while one of the run's own writes is under way: that
            # write may wait on a lock before it takes the run's row. If it
            # holds the row, this heartbeat gives up at its lock timeout, and
            # the lease is safe anyway: a sweep steps over a locked row.
            self._beating = True
        try:
            row = conn.execute(_HEARTBEAT, {"run_id": self.run_id, "epoch": self.epoch,
                                            "lock_timeout": lock_timeout}).fetchone()
            if row is not None and row[0] is False:
                self._stop()
        finally:
            with self._lock:
                self._beating = False
                self._lock.notify_all()


Handler = Callable[[RunContext], Any]


@dataclass(frozen=True)
class Slot:
    """``count`` slots claiming from ``classes``."""

    classes: tuple[int, ...]
    count: int = 1


@dataclass
class WorkerPool:
    conninfo: str
    handlers: Mapping[str, Handler]
    slots: Sequence[Slot | tuple[Sequence[int], int]]
    lease: timedelta = timedelta(seconds=30)
    poll_interval: float = 1.0
    sweep_interval: float | None = 5.0
    grace: float = 10.0
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    connect_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.handlers:
            raise ValueError("a worker pool needs at least one handler")
        self._slots = [s if isinstance(s, Slot) else Slot(tuple(s[0]), s[1]) for s in self.slots]
        self._kinds = sorted(self.handlers)
        self._stopping = threading.Event()
        self._wake = threading.Condition()
        self._inflight: dict[int, RunContext] = {}
        self._inflight_lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Start the slot, heartbeat, listener and sweep threads."""
        for slot in self._slots:
            for n in range(slot.count):
                self._spawn(f"slot{list(slot.classes)}#{n}", self._slot_loop, slot.classes)
        self._spawn("heartbeat", self._heartbeat_loop)
        self._spawn("listen", self._listen_loop)
        if self.sweep_interval:
            self._spawn("sweep", self._sweep_loop)

    def stop(self) -> None:
        """Stop claiming; ``join`` then gives in-flight runs their grace."""
        self._stopping.set()
        with self._wake:
            self._wake.notify_all()

    def join(self) -> None:
        """Wait for the handlers, up to ``grace`` seconds after ``stop()``,
        then release what is still in flight, for at most RELEASE_PATIENCE
        seconds more. Never raises: a run it cannot release is logged, and
        its lease expires as a dead worker's would."""
        self._stopping.wait()
        deadline = time.monotonic() + self.grace
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        # In a thread of its own, so that nothing (a connect to a host that
        # stopped answering, a release waiting on a row another session
        # locked) holds join() past its bound.
        releaser = threading.Thread(target=self._release_leftover, name="runq-release",
                                    daemon=True)
        releaser.start()
        releaser.join(RELEASE_PATIENCE)
        if releaser.is_alive():
            log.warning("gave up releasing after %.0f s: the runs left keep their leases"
                        " until they expire", RELEASE_PATIENCE)

    def _release_leftover(self) -> None:
        link = _Link(self.conninfo, self._connect_kwargs("runq-pool-release"))
        give_up = time.monotonic() + RELEASE_PATIENCE
        try:
            for ctx in self._leftover():
                try:
                    ctx._release(link, patience=max(0.0, give_up - time.monotonic()))
                    log.info("released run %s (epoch %s)", ctx.run_id, ctx.epoch)
                except RunStopped:
                    pass  # finished, fenced or gone meanwhile: nothing to give back
                except Exception as error:
                    log.warning("could not release run %s (epoch %s): %s; its lease will expire",
                                ctx.run_id, ctx.epoch, error)
        finally:
            link.close()

    def _leftover(self) -> list[RunContext]:
        with self._inflight_lock:
            return list(self._inflight.values())

    def run(self) -> None:
        """start(), stop on SIGTERM or SIGINT, join()."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        self.start()
        self.join()

    def _connect_kwargs(self, application_name: str) -> dict[str, Any]:
        # No server-side prepared statements: behind PgBouncer in transaction
        # mode they land on another server connection. They would save little:
        # each call is one function call, whose plans the server caches.
        # A server that vanished without closing the socket (a host gone, a
        # network cut) is noticed in seconds, not at TCP's fifteen minutes.
        return {"application_name": application_name, "prepare_threshold": None,
                "connect_timeout": 5, "keepalives": 1, "keepalives_idle": 5,
                "keepalives_interval": 2, "keepalives_count": 3, "tcp_user_timeout": 10_000,
                **self.connect_kwargs}

    def _link(self, application_name: str) -> _Link:
        return _Link(self.conninfo, self._connect_kwargs(application_name))

    def _slots_alive(self) -> bool:
        return any(t.is_alive() for t in self._threads if t.name.startswith("runq-slot"))

    def inflight(self) -> list[int]:
        with self._inflight_lock:
            return sorted(self._inflight)

    def _forget(self, ctx: RunContext) -> None:
        with self._inflight_lock:
            if self._inflight.get(ctx.run_id) is ctx:
                del self._inflight[ctx.run_id]

    # -- threads ----------------------------------------------------------------

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=self._guarded, args=(target, *args),
                                  name=f"runq-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guarded(self, target: Callable[..., None], *args: Any) -> None:
        # Nothing may silently shrink the pool: whatever a loop raises is
        # logged and the loop starts again after a pause that grows while
        # the failures go on. The queue's state is all in the database.
        pause = self.poll_interval
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                target(*args)
                return
            except Exception as error:
                if time.monotonic() - started > 60:  # a new bout of failures
                    pause = self.poll_interval
                name = threading.current_thread().name
                if isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError)):
                    # The database went away (a restart, a terminated
                    # backend): expected, and no traceback would help.
                    log.warning("%s: %s; reconnecting in %.1f s", name, error, pause)
                else:
                    log.exception("%s failed; starting it again in %.1f s", name, pause)
                self._stopping.wait(pause)
                pause = min(pause * 2, 30.0)

    def _slot_loop(self, classes: tuple[int, ...]) -> None:
        link = self._link("runq-pool")
        try:
            while not self._stopping.is_set():
                runs = link.client().claim(classes, worker_id=self.worker_id, lease=self.lease,
                                           kinds=self._kinds)
                if not runs:
                    with self._wake:
                        self._wake.wait(self.poll_interval)
                    continue
                if self._stopping.is_set():  # stopped while the claim was on its way
                    RunContext(link, runs[0], self.lease)._release()
                    return
                self._execute(link, runs[0])
        finally:
            link.close()

    def _execute(self, link: _Link, run: ClaimedRun) -> None:
        ctx = RunContext(link, run, self.lease)
        with self._inflight_lock:
            self._inflight[run.run_id] = ctx
        handler = self.handlers.get(run.kind)
        try:
            if handler is None:  # claimed by kind, so only if handlers changed since
                log.error("run %s: no handler for kind %s; releasing it", run.run_id, run.kind)
                ctx._release()
            else:
                self._handle(ctx, handler)
        except RunStopped:
            pass
        except Exception:  # about this run only: the slot goes on
            log.exception("run %s (epoch %s): its last write failed", run.run_id, run.epoch)
        finally:
            self._forget(ctx)

    def _handle(self, ctx: RunContext, handler: Handler) -> None:
        try:
            result = handler(ctx)
        except RunStopped:
            return
        except (KeyboardInterrupt, SystemExit) as error:
            log.warning("run %s: the handler raised %r; releasing it and stopping the pool",
                        ctx.run_id, error)
            self.stop()
            ctx._release()
            return
        except BaseException as error:  # the handler's failure is the run's
            if not ctx._done:
                # jsonb holds no \u0000, so neither may the message
                message = (str(error) or type(error).__name__).replace("\x00", "\\0")
                ctx.fail(type(error).__name__, message)
            return
        if ctx._done:
            return
        try:
            ctx.complete(result)
        except (TypeError, ValueError, psycopg.DataError) as error:
            # Not JSON (a set, an object), or JSON that jsonb refuses (NaN,
            # \u0000): the complete never reached the run, so fail it instead.
            ctx.fail("result_not_json",
                     f"the handler's result ({type(result).__name__}) cannot be stored as jsonb:"
                     f" {error}")

    def _heartbeat_loop(self) -> None:
        interval = self.lease.total_seconds() / 3
        lock_timeout = f"{max(1, int(interval * 1000 / 4))}ms"
        link = self._link("runq-pool-heartbeat")
        grace_ends: float | None = None
        try:
            link.connection()  # at start, as every loop: a bad conninfo shows at once
            while True:
                if self._stopping.is_set():
                    # Keep the in-flight runs' leases alive through the grace
                    # period, and while a slot may still bring in a run.
                    grace_ends = grace_ends or time.monotonic() + self.grace
                    if time.monotonic() >= grace_ends or not (self.inflight()
                                                              or self._slots_alive()):
                        return
                started = time.monotonic()
                self._beat(link, lock_timeout)
                pause = interval - (time.monotonic() - started)
                if link.lost:
                    pause = min(pause, self.poll_interval)
                if grace_ends is None:
                    self._stopping.wait(max(0.0, pause))
                else:
                    time.sleep(max(0.0, min(pause, grace_ends - time.monotonic())))
        finally:
            link.close()

    def _beat(self, link: _Link, lock_timeout: str) -> None:
        """One heartbeat for each in-flight run; an error ends that run's only."""
        for ctx in self._leftover():
            try:
                ctx._heartbeat(link.connection(), lock_timeout)
            except psycopg.Error as error:
                if link.lost:
                    log.warning("heartbeats: lost the database (%s)", error)
                    return
                if error.sqlstate == RunNotFound.sqlstate:
                    log.warning("run %s no longer exists; dropping it", ctx.run_id)
                    ctx._stop()
                    self._forget(ctx)
                else:
                    log.warning("heartbeat of run %s: %s", ctx.run_id, error)
            if ctx.stop_requested:
                self._forget(ctx)

    def _listen_loop(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True,
                             **self._connect_kwargs("runq-pool-listen")) as conn:
            conn.execute("LISTEN runq")
            while not self._stopping.is_set():
                for _ in conn.notifies(timeout=self.poll_interval, stop_after=1):
                    with self._wake:
                        self._wake.notify_all()

    def _sweep_loop(self) -> None:
        assert self.sweep_interval
        link = self._link("runq-pool-sweep")
        try:
            link.connection()
            while not self._stopping.wait(self.sweep_interval):
                for action in link.client().sweep():
                    log.info("sweep: run %s %s", action.run_id, action.action)
        finally:
            link.close()


# -- runq worker ------------------------------------------------------------------


def _slot(text: str) -> Slot:
    """``0,10:4`` -> Slot((0, 10), 4)."""
    try:
        classes, _, count = text.partition(":")
        return Slot(tuple(int(c) for c in classes.split(",")), int(count or 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a slot is CLASSES[:COUNT], like 0,10:4; got {text!r}")\
            from None


def main(argv: Sequence[str] | None = None) -> int:
    """``runq worker MODULE``: a pool running the handlers MODULE.HANDLERS
    (a mapping of run kind to handler) until SIGTERM or SIGINT."""
    ap = argparse.ArgumentParser(prog="runq worker", description=main.__doc__)
    ap.add_argument("module", help="module with HANDLERS = {kind: handler}")
    ap.add_argument("--database-url", default=os.environ.get("RUNQ_DATABASE_URL"))
    ap.add_argument("--slot", dest="slots", type=_slot, action="append",
                    help="CLASSES[:COUNT], repeatable (default: 0:1 and 0,10,20:2)")
    ap.add_argument("--lease", type=float, default=30.0, help="lease in seconds")
    ap.add_argument("--poll", type=float, default=1.0, help="poll interval in seconds")
    ap.add_argument("--sweep-every", type=float, default=5.0, help="0: do not sweep")
    ap.add_argument("--grace", type=float, default=10.0, help="seconds to finish on shutdown")
    ap.add_argument("--worker-id")
    opts = ap.parse_args(argv)
    if not opts.database_url:
        print("runq worker: no database: pass --database-url or set RUNQ_DATABASE_URL",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sys.path.insert(0, os.getcwd())
    handlers = importlib.import_module(opts.module).HANDLERS
    pool = WorkerPool(opts.database_url, handlers,
                      opts.slots or [Slot((0,), 1), Slot((0, 10, 20), 2)],
                      lease=timedelta(seconds=opts.lease), poll_interval=opts.poll,
                      sweep_interval=opts.sweep_every or None, grace=opts.grace,
                      **({"worker_id": opts.worker_id} if opts.worker_id else {}))
    pool.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
