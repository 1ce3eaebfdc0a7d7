"""A worker pool: slots per class set, heartbeats, wake-ups, sweeps, shutdown.

Capacity is reserved by declaring slots per class set, for example::

    pool = WorkerPool(url, handlers, slots=[([0], 2), ([0, 10], 4), ([20], 1)])

Two slots claim only interactive runs, so an interactive run never waits
behind async work; four take interactive or async; one does maintenance.
Each slot is a thread with its own connection that claims one run at a time
and runs the handler registered for the run's kind with a RunContext.

The pool keeps no queue logic: every write is one fenced runq function, and
the first one that says ``false`` (or a heartbeat that does) stops the run:
the context raises RunStopped from then on and the pool writes nothing more
for that run. A handler that returns completes the run with its return value;
one that raises fails it with the exception's class and message.

Idle slots wake on ``LISTEN runq`` and poll every ``poll_interval`` seconds
in any case (a PgBouncer in transaction mode drops notifications). A timer
thread sweeps. ``stop()`` (SIGTERM or SIGINT under ``run()``) stops claiming,
gives in-flight handlers ``grace`` seconds, then releases the runs still in
flight with ``runq.release``, which follows each run's recovery policy.
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
from typing import Any

import psycopg

from runq.client import Client
from runq.types import ClaimedRun, ToolCall

__all__ = ["Handler", "RunContext", "RunStopped", "Slot", "WorkerPool", "main"]

log = logging.getLogger("runq.pool")


class RunStopped(Exception):
    """The run is no longer this worker's (fenced, cancelled, released):
    stop working on it. The pool writes nothing more for it."""


class RunContext:
    """What a handler gets: the claimed run and its fenced writes.

    Every write raises RunStopped instead of returning ``false``, so a
    handler cannot carry on by accident after losing its run. Long
    computations between writes can poll ``stop_requested``.
    """

    def __init__(self, client: Client, run: ClaimedRun) -> None:
        self.run = run
        self._client = client
        self._stopped = threading.Event()
        self._finished = False
        # Serialises this run's writes with the heartbeater's, so a heartbeat
        # never lands after the run's last write (it would log run.fenced).
        self._lock = threading.Lock()

    @property
    def run_id(self) -> int:
        return self.run.run_id

    @property
    def epoch(self) -> int:
        return self.run.epoch

    @property
    def stop_requested(self) -> bool:
        """True once the run is no longer ours; every write then raises."""
        return self._stopped.is_set()

    def _write(self, call: Callable[[], bool], *, final: bool = False) -> None:
        with self._lock:
            if self._stopped.is_set() or self._finished:
                raise RunStopped(f"run {self.run_id} epoch {self.epoch} is no longer ours")
            if not call():
                self._stopped.set()
                raise RunStopped(f"run {self.run_id} epoch {self.epoch} was fenced or cancelled")
            self._finished = final

    def checkpoint(self, state: Any) -> None:
        self._write(lambda: self._client.checkpoint(self.run_id, self.epoch, state))

    def begin_turn(self) -> None:
        self._write(lambda: self._client.begin_turn(self.run_id, self.epoch))

    def begin_tool(self, call_id: str, tool: str, idempotency: str,
                   args: Mapping[str, Any] | None = None) -> None:
        self._write(lambda: self._client.begin_tool(self.run_id, self.epoch, call_id, tool,
                                                    idempotency, args))

    def end_tool(self, call_id: str, outcome: Any) -> None:
        self._write(lambda: self._client.end_tool(self.run_id, self.epoch, call_id, outcome))

    def tool_calls(self) -> list[ToolCall]:
        """The run's tool calls: which are retryable, which uncertain."""
        return self._client.tool_calls(self.run_id)

    def ask_user(self, question: Any) -> None:
        """Wait for the user; the handler should return after this."""
        self._write(lambda: self._client.ask_user(self.run_id, self.epoch, question), final=True)

    def complete(self, result: Any = None) -> None:
        self._write(lambda: self._client.complete(self.run_id, self.epoch, result), final=True)

    def fail(self, code: str, message: str | None = None, **details: Any) -> None:
        failure = {"code": code, **({"message": message} if message else {}), **details}
        self._write(lambda: self._client.fail(self.run_id, self.epoch, failure), final=True)

    def _heartbeat(self, client: Client) -> None:
        with self._lock:
            if self._stopped.is_set() or self._finished:
                return
            if not client.heartbeat(self.run_id, self.epoch):
                self._stopped.set()

    def _release(self, client: Client) -> None:
        with self._lock:
            if self._stopped.is_set() or self._finished:
                return
            self._stopped.set()
            client.release(self.run_id, self.epoch)


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
        self._slots = [s if isinstance(s, Slot) else Slot(tuple(s[0]), s[1]) for s in self.slots]
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
        then release what is still in flight."""
        self._stopping.wait()
        deadline = time.monotonic() + self.grace
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._inflight_lock:
            leftover = list(self._inflight.values())
        if leftover:
            kwargs = self._connect_kwargs("runq-pool-release")
            with Client.connect(self.conninfo, **kwargs) as client:
                for ctx in leftover:
                    ctx._release(client)
                    log.info("released run %s (epoch %s)", ctx.run_id, ctx.epoch)

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
        return {"application_name": application_name, "prepare_threshold": None,
                **self.connect_kwargs}

    def inflight(self) -> list[int]:
        with self._inflight_lock:
            return sorted(self._inflight)

    # -- threads ----------------------------------------------------------------

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=self._guarded, args=(target, *args),
                                  name=f"runq-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guarded(self, target: Callable[..., None], *args: Any) -> None:
        # A lost connection (server restart, terminated backend) or any other
        # database error must not silently shrink the pool: log, wait a poll
        # interval, reconnect. The queue's state is all in the database.
        while not self._stopping.is_set():
            try:
                target(*args)
                return
            except psycopg.Error as error:
                log.warning("%s: %s; reconnecting", threading.current_thread().name, error)
                self._stopping.wait(self.poll_interval)

    def _slot_loop(self, classes: tuple[int, ...]) -> None:
        with Client.connect(self.conninfo, **self._connect_kwargs("runq-pool")) as client:
            while not self._stopping.is_set():
                runs = client.claim(classes, worker_id=self.worker_id, lease=self.lease)
                if not runs:
                    with self._wake:
                        self._wake.wait(self.poll_interval)
                    continue
                self._execute(client, runs[0])

    def _execute(self, client: Client, run: ClaimedRun) -> None:
        ctx = RunContext(client, run)
        with self._inflight_lock:
            self._inflight[run.run_id] = ctx
        try:
            handler = self.handlers.get(run.kind)
            if handler is None:
                ctx.fail("no_handler", f"no handler for kind {run.kind}")
                return
            try:
                result = handler(ctx)
            except RunStopped:
                return
            except Exception as error:  # the handler's failure is the run's
                if not ctx.stop_requested:
                    ctx.fail(type(error).__name__, str(error) or type(error).__name__)
                return
            if not ctx._finished and not ctx.stop_requested:
                ctx.complete(result)
        except RunStopped:
            pass
        finally:
            with self._inflight_lock:
                self._inflight.pop(run.run_id, None)

    def _heartbeat_loop(self) -> None:
        interval = self.lease.total_seconds() / 3
        with Client.connect(self.conninfo, **self._connect_kwargs("runq-pool-heartbeat")) as client:
            while not self._stopping.wait(interval):
                with self._inflight_lock:
                    contexts = list(self._inflight.values())
                for ctx in contexts:
                    ctx._heartbeat(client)
            # Keep the in-flight runs' leases alive through the grace period.
            deadline = time.monotonic() + self.grace
            while self.inflight() and time.monotonic() < deadline:
                with self._inflight_lock:
                    contexts = list(self._inflight.values())
                for ctx in contexts:
                    ctx._heartbeat(client)
                time.sleep(min(interval, max(0.0, deadline - time.monotonic())))

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
        with Client.connect(self.conninfo, **self._connect_kwargs("runq-pool-sweep")) as client:
            while not self._stopping.wait(self.sweep_interval):
                for action in client.sweep():
                    log.info("sweep: run %s %s", action.run_id, action.action)


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
