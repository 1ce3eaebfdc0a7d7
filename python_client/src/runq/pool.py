"""A worker pool: thousands of runs on a handful of connections.

Capacity is reserved by declaring slots per class set, for example::

    pool = WorkerPool(url, handlers, slots=[([0], 2), ([0, 10], 400), ([20], 1)])

Two runs at a time are only ever interactive ones, so an interactive run
never waits behind async work; 400 take interactive or async; one does
maintenance. Each class set claims up to its free capacity at once, of the
kinds the pool has handlers for only (a rolling deploy never hands a new kind
to an old worker), and runs each run's handler with a context.

A handler is ``async def handler(ctx: AsyncRunContext)`` (awaited on the
pool's event loop: a run holds no thread and no connection while it awaits)
or ``def handler(ctx: RunContext)`` (run in a thread of its own, for code
that blocks). Both kinds share one core: one event loop, a small
psycopg_pool for the runs' writes, claims and sweeps (``max_connections``,
whatever the concurrency), one connection for heartbeats and one for LISTEN.

The pool keeps no queue logic: every write is one fenced runq function, and
the first one that says ``false`` stops the run: the context raises
RunStopped from then on and the pool writes nothing more for that run. The
one exception is ``ctx.record_usage``: spend is a fact, so it is sent (and
recorded by runq) even once the run is no longer this worker's, and it
answers False rather than raising. RunStopped says why in ``reason``, which
the pool reads once (``runq.get_run``) after the first refusal: the cancel,
the deadline or the budget, or else fenced. A handler that returns
completes the run with its return value; one that raises fails it with the
exception's class and message; a return value jsonb cannot hold fails it
with code ``result_not_json``. The claimed run's budget, deadline and usage
(as of the claim, over every attempt) are on the context.

Every lease/3 one ``runq.heartbeat_many`` extends the lease of every run in
flight. A run whose element comes back false (fenced, cancelled) is stopped
at once, and an async handler's task is cancelled ``stop_grace`` seconds
later if it has not returned. Completions go through ``runq.complete_many``:
a completion is sent at once when none is on its way, and those that arrive
while one is become the next batch, so a lone completion waits for nothing
and a burst shares round trips. A run keeps its heartbeats while its
completion waits in line, and a batch that meets a locked row gives up at its
lock timeout and completes its runs one by one, each on its own.

Nothing stops a loop of the pool: an error about one run ends the handling
of that run only, any other error is logged and the loop carries on after a
pause. A write that loses its connection (a server restart, a terminated
backend) is sent again on a new one for up to a lease; fencing makes that
safe. A heartbeat batch that meets a row another session holds locked gives
up at its lock timeout, and the runs are then beaten one by one, the locked
one on its own until its row is free again, so one locked run costs the
others at most a lock timeout.

Idle class sets wake on ``LISTEN runq`` and poll every ``poll_interval``
seconds in any case (a PgBouncer in transaction mode drops notifications). A
timer sweeps, and another ticks the schedules (``runq.tick``: any number of
pools may, a slot still makes one run). ``stop()`` (SIGTERM or SIGINT under
``run()``) stops claiming, gives in-flight handlers ``grace`` seconds, then
releases the runs still in flight with ``runq.release``, which follows each
run's recovery policy. A handler that raises SystemExit or KeyboardInterrupt
gives its run back the same way and stops the pool.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar, cast

import psycopg
from psycopg_pool import AsyncConnectionPool

from runq.client import AsyncClient, _jsonb, json_text
from runq.errors import RunNotFound
from runq.types import ClaimedRun, Run, ToolCall

__all__ = ["AsyncRunContext", "Handler", "RunContext", "RunStopped", "Slot", "WorkerPool",
           "main"]

log = logging.getLogger("runq.pool")

T = TypeVar("T")

# Schedules per runq.tick (its default).
TICK_BATCH = 100

# How long the releases after the grace period may take together (a database
# that is gone cannot take the runs back; their leases expire).
RELEASE_PATIENCE = 3.0

# Largest heartbeat_many or complete_many: one statement each, whatever the
# number of runs in flight, up to this.
BATCH = 5000

# A heartbeat waits at most a lock timeout for a row another session holds
# locked. It is set for that one statement only (set_config(..., true)):
# safe behind PgBouncer in transaction mode, where a SET would stay on the
# server connection for whichever client comes next. The CASE makes the
# function's argument depend on set_config, so the planner cannot call the
# function first.
_HEARTBEAT_MANY = """SELECT h.run_id, h.alive
  FROM (SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS lock_timeout) AS s
 CROSS JOIN LATERAL runq.heartbeat_many(
           CASE WHEN s.lock_timeout IS NOT NULL THEN %(run_ids)s::bigint[] END,
           %(epochs)s::bigint[]) AS h"""

# The same for completions: one row another session holds locked must not
# hold up every completion behind it; the batch is then sent one by one.
_COMPLETE_MANY = """SELECT c.run_id, c.completed
  FROM (SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS lock_timeout) AS s
 CROSS JOIN LATERAL runq.complete_many(
           CASE WHEN s.lock_timeout IS NOT NULL THEN %(run_ids)s::bigint[] END,
           %(epochs)s::bigint[], %(results)s::jsonb[]) AS c"""

_LOCK_NOT_AVAILABLE = "55P03"


class RunStopped(Exception):
    """The run is no longer this worker's (fenced, cancelled, failed by its
    deadline or budget, released, purged): stop working on it. The pool
    writes nothing more for it.

    ``reason`` says why, as the pool found it:

    * ``"cancelled"``, ``"deadline_exceeded"``, ``"budget_exhausted"``: runq
      stopped the run under this worker's epoch (a cancel flag, the deadline,
      begin_turn's budget gate); read from the run's status and failure code
      (one ``runq.get_run``, after the first refusal only);
    * ``"fenced"``: anything else that took the run away (another epoch holds
      it, the sweep took it back, a lease the database stayed out of reach
      for); also when the reason could not be read;
    * ``"finished"``: this handler's own last write (complete, fail,
      ask_user) has gone out already;
    * ``"not_found"``: the run no longer exists (purged);
    * ``"pool_stopped"``: the pool's event loop has ended;
    * None: a RunStopped the handler raised itself without one.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


# How long reading why a run stopped may take before the reason is "fenced".
REASON_PATIENCE = 5.0


def _stop_reason(run: Run, epoch: int) -> tuple[str, str | None]:
    """Why runq stopped our epoch of the run, and the failure's message when
    its deadline or budget did: the rules are runq's, this only reads them."""
    if run.lease_epoch != epoch:
        return "fenced", None
    if run.status == "cancelled":
        return "cancelled", None
    failure = run.failure or {}
    code = failure.get("code")
    if run.status == "failed" and code in ("deadline_exceeded", "budget_exhausted"):
        return str(code), str(failure.get("message") or code)
    return "fenced", None


def _lost(conn: psycopg.AsyncConnection[Any]) -> bool:
    return conn.closed or conn.broken


class _Link:
    """A connection of the pool's own (heartbeats, LISTEN): opened on first
    use, and again after it broke."""

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any]) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._conn: psycopg.AsyncConnection[Any] | None = None

    @property
    def lost(self) -> bool:
        return self._conn is None or _lost(self._conn)

    async def connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or _lost(self._conn):
            await self.close()
            self._conn = await psycopg.AsyncConnection.connect(self._conninfo, **self._kwargs)
        return self._conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # already broken: nothing to give back
                log.debug("closing a broken connection failed", exc_info=True)


class _Run:
    """What the pool knows of one run in flight. Touched on the event loop
    only; other threads only read it."""

    def __init__(self, run: ClaimedRun, slot: _SlotState) -> None:
        self.run = run
        self.slot = slot
        self.stopped = False      # no longer ours: every write raises
        self.finishing = False    # the last write is under way, or done
        self.completing = False   # its completion is queued: no other write may follow
        self.alone = False        # its row was locked at its last heartbeat
        self.cancellable = False  # an async handler, whose task cancel() stops
        self.not_beating = asyncio.Event()
        self.not_beating.set()
        self.task: asyncio.Future[None] | None = None
        # Why it stopped, once read; and the failure's message if runq said one.
        self.reason: str | None = None
        self.reason_message: str | None = None
        # How many record_usage calls of each usage (as JSON) landed.
        self.usage_landed: Counter[str] = Counter()

    @property
    def run_id(self) -> int:
        return self.run.run_id

    @property
    def epoch(self) -> int:
        return self.run.epoch

    @property
    def done(self) -> bool:
        """No heartbeat goes out for it any more."""
        return self.stopped or self.finishing

    @property
    def closed(self) -> bool:
        """No write goes out for it any more."""
        return self.done or self.completing

    def refused(self, why: str) -> RunStopped:
        if not self.stopped:
            return RunStopped(f"run {self.run_id} epoch {self.epoch} {why}", "finished")
        if self.reason_message is not None:
            return RunStopped(f"run {self.run_id} epoch {self.epoch} failed: "
                              f"{self.reason_message}", self.reason)
        return RunStopped(f"run {self.run_id} epoch {self.epoch} {why}", self.reason)


class AsyncRunContext:
    """What an async handler gets: the claimed run and its fenced writes,
    awaited. Every write raises RunStopped instead of returning ``false``,
    so a handler cannot carry on by accident after losing its run."""

    def __init__(self, core: _Core, state: _Run) -> None:
        self._core = core
        self._state = state

    @property
    def run(self) -> ClaimedRun:
        return self._state.run

    @property
    def run_id(self) -> int:
        return self._state.run_id

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def stop_requested(self) -> bool:
        """True once the run is no longer ours; every write then raises."""
        return self._state.stopped

    @property
    def budget(self) -> dict[str, Decimal] | None:
        """The run's budget as claimed (None: none)."""
        return self._state.run.budget

    @property
    def deadline(self) -> datetime | None:
        """The run's deadline as claimed (None: no timeout)."""
        return self._state.run.deadline

    @property
    def usage(self) -> dict[str, Decimal]:
        """The usage totals at the claim, over every attempt ({} when none):
        what earlier attempts spent. What this one records is not added."""
        return self._state.run.usage

    async def record_usage(self, usage: Mapping[str, int | float | Decimal]) -> bool:
        """Record what a model or tool call spent (runq.record_usage), after
        it: ``{"input_tokens": 1200, "cost_usd": Decimal("0.0123")}``.

        Spend is a fact whoever holds the run now, so unlike every other write
        this one is sent even once the run is no longer ours (runq records it
        under our epoch) and never raises RunStopped for that: it returns
        True while the run is ours, False when it is not (the run is then
        stopped, as a false answer always stops it, and the next other write
        raises RunStopped). A call lost with its connection is sent again only
        if the run's run.usage events of our epoch show it did not land, so it
        is never counted twice (two identical usages this handler records at
        once, one of them lost, cannot be told apart: that one is then taken
        as landed).
        Raises InvalidArgument for usage runq refuses, RunStopped only when
        the run no longer exists (nothing could be recorded)."""
        return await self._core.record_usage(self._state, usage)

    async def _write(self, call: Callable[[AsyncClient], Awaitable[bool]], **how: Any) -> None:
        await self._core.write(self._state, call, **how)

    async def checkpoint(self, state: Any) -> None:
        await self._write(lambda c: c.checkpoint(self.run_id, self.epoch, state))

    async def begin_turn(self) -> None:
        await self._core.write(self._state, lambda c: c.begin_turn(self.run_id, self.epoch))

    async def begin_tool(self, call_id: str, tool: str, idempotency: str,
                         args: Mapping[str, Any] | None = None) -> None:
        await self._core.write(self._state, lambda c: c.begin_tool(
            self.run_id, self.epoch, call_id, tool, idempotency, args))

    async def end_tool(self, call_id: str, outcome: Any) -> None:
        # Sent again after it committed, end_tool would raise RQ004 (the call
        # is finished): ask first.
        async def landed(c: AsyncClient) -> bool:
            return any(t.call_id == call_id and t.status == "finished" and t.epoch == self.epoch
                       for t in await c.tool_calls(self.run_id))
        await self._core.write(self._state, lambda c: c.end_tool(
            self.run_id, self.epoch, call_id, outcome), landed=landed)

    async def tool_calls(self) -> list[ToolCall]:
        """The run's tool calls: which are retryable, which uncertain."""
        return await self._core.persist(_on_client(lambda c: c.tool_calls(self.run_id)))

    async def ask_user(self, question: Any) -> None:
        """Wait for the user; the handler should return after this."""
        await self._core.write(self._state, lambda c: c.ask_user(
            self.run_id, self.epoch, question), final=True)

    async def complete(self, result: Any = None) -> None:
        await self._core.write(self._state, None, final=True, result=result)

    async def fail(self, code: str, message: str | None = None, **details: Any) -> None:
        failure = {"code": code, **({"message": message} if message else {}), **details}
        await self._core.write(self._state, lambda c: c.fail(self.run_id, self.epoch, failure),
                               final=True)


class RunContext:
    """What a sync handler gets: AsyncRunContext's calls, each run on the
    pool's event loop while the handler's thread waits for it."""

    def __init__(self, context: AsyncRunContext, loop: asyncio.AbstractEventLoop) -> None:
        self._async = context
        self._loop = loop

    @property
    def run(self) -> ClaimedRun:
        return self._async.run

    @property
    def run_id(self) -> int:
        return self._async.run_id

    @property
    def epoch(self) -> int:
        return self._async.epoch

    @property
    def stop_requested(self) -> bool:
        """True once the run is no longer ours; every write then raises."""
        return self._async.stop_requested

    @property
    def budget(self) -> dict[str, Decimal] | None:
        """The run's budget as claimed (None: none)."""
        return self._async.budget

    @property
    def deadline(self) -> datetime | None:
        """The run's deadline as claimed (None: no timeout)."""
        return self._async.deadline

    @property
    def usage(self) -> dict[str, Decimal]:
        """The usage totals at the claim, over every attempt ({} when none)."""
        return self._async.usage

    def record_usage(self, usage: Mapping[str, int | float | Decimal]) -> bool:
        """AsyncRunContext.record_usage: sent even once the run is no longer
        ours; True while it is ours, False when not (never RunStopped for
        that)."""
        return self._wait(self._async.record_usage(usage))

    def _wait(self, call: Coroutine[Any, Any, T]) -> T:
        try:
            future = asyncio.run_coroutine_threadsafe(call, self._loop)
        except RuntimeError:  # the pool's loop is gone: so is the run
            call.close()
            raise RunStopped(f"run {self.run_id}: the pool has stopped", "pool_stopped") from None
        return future.result()

    def _write(self, call: Callable[[AsyncClient], Awaitable[bool]], **how: Any) -> None:
        self._wait(self._async._write(call, **how))

    def checkpoint(self, state: Any) -> None:
        self._wait(self._async.checkpoint(state))

    def begin_turn(self) -> None:
        self._wait(self._async.begin_turn())

    def begin_tool(self, call_id: str, tool: str, idempotency: str,
                   args: Mapping[str, Any] | None = None) -> None:
        self._wait(self._async.begin_tool(call_id, tool, idempotency, args))

    def end_tool(self, call_id: str, outcome: Any) -> None:
        self._wait(self._async.end_tool(call_id, outcome))

    def tool_calls(self) -> list[ToolCall]:
        """The run's tool calls: which are retryable, which uncertain."""
        return self._wait(self._async.tool_calls())

    def ask_user(self, question: Any) -> None:
        """Wait for the user; the handler should return after this."""
        self._wait(self._async.ask_user(question))

    def complete(self, result: Any = None) -> None:
        self._wait(self._async.complete(result))

    def fail(self, code: str, message: str | None = None, **details: Any) -> None:
        self._wait(self._async.fail(code, message, **details))


Handler = Callable[[RunContext], Any] | Callable[[AsyncRunContext], Awaitable[Any]]


def _is_async(handler: Handler) -> bool:
    # a function, or an object whose __call__ is one
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None))  # noqa: B004


@dataclass(frozen=True)
class Slot:
    """``count`` runs at a time claimed from ``classes``."""

    classes: tuple[int, ...]
    count: int = 1


class _SlotState:
    def __init__(self, slot: Slot) -> None:
        self.classes = slot.classes
        self.count = slot.count
        self.busy = 0
        self.freed = asyncio.Event()


@dataclass
class _Completion:
    state: _Run
    result: Any
    answer: asyncio.Future[bool]


class _Core:
    """The pool's event loop side: its connections, loops and runs."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.loop = asyncio.get_running_loop()
        self.lease = pool.lease.total_seconds()
        self.kinds = sorted(pool.handlers)
        self.stopping = asyncio.Event()
        self.wake = asyncio.Event()
        self.runs: dict[int, _Run] = {}
        self.tasks: set[asyncio.Future[None]] = set()
        self.completions: asyncio.Queue[_Completion] = asyncio.Queue()
        self.side_tasks: set[asyncio.Future[None]] = set()
        # A quarter of the heartbeat interval: see _HEARTBEAT_MANY.
        self.lock_timeout = f"{max(1, int(self.lease / 3 * 1000 / 4))}ms"
        self.db = AsyncConnectionPool(
            pool.conninfo, min_size=1, max_size=pool.max_connections, open=False,
            kwargs=pool._connect_kwargs("runq-pool"), name="runq-pool")

    # -- writes -----------------------------------------------------------------

    async def persist(self, call: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
                      patience: float | None = None,
                      landed: Callable[[psycopg.AsyncConnection[Any]], Awaitable[bool]] | None
                      = None) -> T:
        """``call`` on a connection of the pool; sent again on another for up
        to ``patience`` seconds (a lease) while the connection is what
        failed. An error of the statement itself is raised at once.

        A call whose connection broke after it was sent may have committed.
        Sending a fenced write again is safe (it applies once, or answers
        false), but not always quiet: ``landed``, when given, asks the
        database first whether the lost call took effect."""
        deadline = time.monotonic() + (self.lease if patience is None else patience)
        pause = 0.05
        sent = False
        while True:
            failed: psycopg.Error | None = None
            try:
                async with self.db.connection(timeout=max(0.1, deadline - time.monotonic())) \
                        as conn:
                    try:
                        if sent and landed is not None and await landed(conn):
                            return True  # type: ignore[return-value]
                        sent = True
                        return await call(conn)
                    except psycopg.Error as error:
                        if _lost(conn):
                            raise _ConnectionLost(str(error)) from None
                        failed = error  # the statement's own error: raised below, at once
            except (_ConnectionLost, psycopg.OperationalError) as error:
                # The connection broke, or none could be had (PoolTimeout).
                if time.monotonic() >= deadline:
                    raise _OutOfReach(f"the database stayed out of reach: {error}") from None
                log.warning("lost the database (%s); trying again", error)
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 1.0)
                continue
            raise failed

    async def write(self, state: _Run, call: Callable[[AsyncClient], Awaitable[bool]] | None, *,
                    final: bool = False, result: Any = None, patience: float | None = None,
                    landed: Callable[[AsyncClient], Awaitable[bool]] | None = None) -> None:
        """One fenced write of a run; call None is its completion."""
        if state.closed:
            raise await self.refusal(state, "is no longer ours")
        try:
            if call is None:
                applied = await self.complete(state, result)
            else:
                if final:
                    # The last write waits out a heartbeat already sent, so
                    # that the heartbeat cannot land after it and log run.fenced.
                    state.finishing = True
                    await _all_set([state.not_beating], self.lease if patience is None
                                   else patience)
                probe = None if landed is None else _on_client(landed)
                applied = await self.persist(_on_client(call), patience, probe)
        except RunNotFound:
            state.stopped = True
            state.reason = "not_found"
            raise RunStopped(f"run {state.run_id} no longer exists", "not_found") from None
        except asyncio.CancelledError:
            # Cancelled on its way: it may still land, so nothing may follow it.
            raise
        except BaseException as error:
            # A write that raised did not change the run (bad argument, a
            # value jsonb refuses): the handler, or the pool, may write again.
            # Unless the database stayed out of reach for a whole lease: then
            # the run is most likely no longer ours.
            state.finishing = state.finishing and not final
            state.completing = False
            state.stopped = state.stopped or isinstance(error, _OutOfReach)
            raise
        if not applied:
            self.stop_run(state)
            raise await self.refusal(state, "was fenced or cancelled")

    async def refusal(self, state: _Run, why: str) -> RunStopped:
        """The RunStopped for a write refused; why the run stopped is read
        once, the first time (a run closed by its own last write needs no
        read)."""
        if state.stopped and state.reason is None:
            state.reason, state.reason_message = await self.stop_reason(state)
        return state.refused(why)

    async def stop_reason(self, state: _Run) -> tuple[str, str | None]:
        try:
            run = await self.persist(_on_client(lambda c: c.get_run(state.run_id)),
                                     patience=min(self.lease, REASON_PATIENCE))
        except RunNotFound:
            return "not_found", None
        except Exception as error:  # the database is out of reach: all we know
            log.info("run %s: could not read why it stopped: %s", state.run_id, error)
            return "fenced", None
        return _stop_reason(run, state.epoch)

    async def record_usage(self, state: _Run, usage: Mapping[str, Any]) -> bool:
        """runq.record_usage under the run's epoch, whatever the run's state:
        see AsyncRunContext.record_usage."""
        key = json_text(usage, sort_keys=True)  # what it is sent as, and its events hold
        expected = state.usage_landed[key] + 1

        async def landed(c: AsyncClient) -> bool:
            # Our epoch is ours alone: its run.usage events of this usage are
            # the calls of this one that landed.
            wanted = json.loads(key)
            return sum(1 for e in await c.run_events(state.run_id)
                       if e.type == "run.usage" and e.epoch == state.epoch
                       and e.payload == wanted) >= expected

        try:
            ours = await self.persist(
                _on_client(lambda c: c.record_usage(state.run_id, state.epoch, usage)),
                landed=_on_client(landed))
        except RunNotFound:
            state.stopped = True
            state.reason = "not_found"
            raise RunStopped(f"run {state.run_id} no longer exists: its usage was not"
                             " recorded", "not_found") from None
        state.usage_landed[key] += 1
        if not ours and not state.closed:
            self.stop_run(state)
        return ours

    async def complete(self, state: _Run, result: Any) -> bool:
        # Queued, the run keeps its heartbeats: a batch may wait on a row lock.
        state.completing = True
        answer: asyncio.Future[bool] = self.loop.create_future()
        self.completions.put_nowait(_Completion(state, result, answer))
        return await asyncio.shield(answer)

    async def complete_loop(self) -> None:
        # One batch on its way at a time: a completion that finds none waits
        # for nothing; those that come meanwhile go together next.
        while True:
            batch = [await self.completions.get()]
            while not self.completions.empty() and len(batch) < BATCH:
                batch.append(self.completions.get_nowait())
            await self.complete_batch(batch)

    async def complete_batch(self, batch: list[_Completion]) -> None:
        # Their heartbeats stop here, and one already sent is waited out, so
        # that no heartbeat lands after its run's completion.
        for b in batch:
            b.state.finishing = True
        await _all_set([b.state.not_beating for b in batch], self.lease)
        try:
            done = await self.persist(lambda conn: self.complete_many(conn, batch))
        except _OutOfReach as error:
            for b in batch:
                _settle(b.answer, error=error)
            return
        except Exception as error:
            # A locked row (lock timeout), or one element spoiled the batch (a
            # result jsonb refuses, a purged run): each on its own, off this
            # loop, so the error reaches its run only and nothing waits for it.
            log.info("complete_many: %s; completing %d runs one by one", error, len(batch))
            for b in batch:
                task = asyncio.ensure_future(self.complete_one(b))
                self.side_tasks.add(task)
                task.add_done_callback(self.side_tasks.discard)
            return
        for b in batch:
            _settle(b.answer, done[b.state.run_id])

    async def complete_many(self, conn: psycopg.AsyncConnection[Any],
                            batch: list[_Completion]) -> dict[int, bool]:
        cur = await conn.execute(_COMPLETE_MANY, {
            "lock_timeout": self.lock_timeout,
            "run_ids": [b.state.run_id for b in batch],
            "epochs": [b.state.epoch for b in batch],
            "results": [_jsonb(b.result) for b in batch]})
        return dict(await cur.fetchall())

    async def complete_one(self, b: _Completion) -> None:
        try:
            _settle(b.answer, await self.persist(_on_client(
                lambda c: c.complete(b.state.run_id, b.state.epoch, b.result))))
        except Exception as error:
            _settle(b.answer, error=error)

    def stop_run(self, state: _Run) -> None:
        """The run is no longer ours: no write goes out for it any more, its
        lease is no longer kept, and an async handler still at it is
        cancelled after stop_grace."""
        state.stopped = True
        self.forget(state)
        task = state.task
        if task is not None and not task.done() and state.cancellable:
            self.loop.call_later(self.pool.stop_grace, task.cancel)

    def forget(self, state: _Run) -> None:
        if self.runs.get(state.run_id) is state:
            del self.runs[state.run_id]

    # -- heartbeats -------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        interval = self.lease / 3
        lock_timeout = self.lock_timeout
        link = _Link(self.pool.conninfo, self.pool._connect_kwargs("runq-pool-heartbeat"))
        try:
            await link.connection()  # at start, as every loop: a bad conninfo shows at once
            while True:
                started = time.monotonic()
                await self.beat(link, lock_timeout)
                pause = interval - (time.monotonic() - started)
                if link.lost:
                    pause = min(pause, self.pool.poll_interval)
                await asyncio.sleep(max(0.0, pause))
        finally:
            await link.close()

    async def beat(self, link: _Link, lock_timeout: str) -> None:
        """One heartbeat for every run in flight: those whose row was locked
        last time one by one, the rest in batches."""
        states = [s for s in self.runs.values() if not s.done]
        for s in states:
            s.not_beating.clear()
        try:
            conn = await link.connection()
            alone = [s for s in states if s.alone]
            together = [s for s in states if not s.alone]
            for i in range(0, len(together), BATCH):
                batch = together[i:i + BATCH]
                try:
                    cur = await conn.execute(_HEARTBEAT_MANY, {
                        "lock_timeout": lock_timeout, "run_ids": [s.run_id for s in batch],
                        "epochs": [s.epoch for s in batch]})
                    alive = dict(await cur.fetchall())
                except psycopg.Error as error:
                    if _lost(conn):
                        raise
                    # A locked row (lock timeout) or a purged run (RQ003):
                    # find out which, one by one.
                    log.info("heartbeat_many: %s; beating %d runs one by one", error, len(batch))
                    alone += batch
                    continue
                for s in batch:
                    if alive[s.run_id] is False:
                        self.stop_run(s)
                    s.not_beating.set()  # a final write waiting for it may go now
            for s in alone:
                await self.beat_alone(conn, s, lock_timeout)
                s.not_beating.set()
        except psycopg.Error as error:
            log.warning("heartbeats: lost the database (%s)", error)
        finally:
            for s in states:
                s.not_beating.set()

    async def beat_alone(self, conn: psycopg.AsyncConnection[Any], state: _Run,
                         lock_timeout: str) -> None:
        try:
            cur = await conn.execute(_HEARTBEAT_MANY, {
                "lock_timeout": lock_timeout, "run_ids": [state.run_id], "epochs": [state.epoch]})
            row = await cur.fetchone()
        except psycopg.Error as error:
            if _lost(conn):
                raise
            if error.sqlstate == RunNotFound.sqlstate:
                log.warning("run %s no longer exists; dropping it", state.run_id)
                self.stop_run(state)
            else:
                state.alone = error.sqlstate == _LOCK_NOT_AVAILABLE
                log.warning("heartbeat of run %s: %s", state.run_id, error)
            return
        state.alone = False
        if row is not None and row[1] is False:
            self.stop_run(state)

    # -- claims -----------------------------------------------------------------

    async def slot_loop(self, slot: _SlotState) -> None:
        while not self.stopping.is_set():
            free = slot.count - slot.busy
            if free <= 0:
                slot.freed.clear()
                await _first(self.pool.poll_interval, slot.freed, self.stopping)
                continue
            wake = self.wake  # before the claim: news during its round trip must count
            async with self.db.connection() as conn:
                runs = await AsyncClient(conn).claim(
                    slot.classes, worker_id=self.pool.worker_id, lease=self.pool.lease,
                    max_runs=free, kinds=self.kinds)
            for run in runs:
                self.start(run, slot)
            if self.stopping.is_set():  # stopped while the claim was on its way
                return
            if len(runs) < free:  # nothing more is ready: wait for news
                await _first(self.pool.poll_interval, wake, self.stopping)

    def claimer(self, slot: _SlotState) -> Callable[[], Awaitable[None]]:
        return lambda: self.slot_loop(slot)

    def start(self, run: ClaimedRun, slot: _SlotState) -> None:
        state = _Run(run, slot)
        self.runs[run.run_id] = state
        slot.busy += 1
        task = asyncio.ensure_future(self.execute(state))
        state.task = task
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def execute(self, state: _Run) -> None:
        try:
            handler = self.pool.handlers.get(state.run.kind)
            if self.stopping.is_set():
                await self.release(state)
            elif handler is None:  # claimed by kind, so only if handlers changed since
                log.error("run %s: no handler for kind %s; releasing it", state.run_id,
                          state.run.kind)
                await self.release(state)
            else:
                await self.handle(state, handler)
        except RunStopped:
            pass
        except asyncio.CancelledError:  # stopped, or the pool stopped: its run is not ours
            log.info("run %s (epoch %s): its handler was cancelled", state.run_id, state.epoch)
        except Exception:  # about this run only: the pool goes on
            log.exception("run %s (epoch %s): its last write failed", state.run_id, state.epoch)
        finally:
            self.forget(state)
            state.slot.busy -= 1
            state.slot.freed.set()

    async def handle(self, state: _Run, handler: Handler) -> None:
        ctx = AsyncRunContext(self, state)
        result: Any = None
        error: BaseException | None = None
        if _is_async(handler):
            state.cancellable = True
            try:
                result = await cast(Callable[[AsyncRunContext], Awaitable[Any]], handler)(ctx)
            except asyncio.CancelledError:
                raise
            except BaseException as raised:  # the handler's failure is the run's
                error = raised
        else:
            result, error = await self.in_thread(cast(Callable[[RunContext], Any], handler),
                                                 RunContext(ctx, self.loop))
        if isinstance(error, RunStopped):
            return
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            log.warning("run %s: the handler raised %r; releasing it and stopping the pool",
                        state.run_id, error)
            self.pool.stop()
            await self.release(state)
            return
        if state.closed:
            return
        if error is not None:
            # jsonb holds no \u0000, so neither may the message
            message = (str(error) or type(error).__name__).replace("\x00", "\\0")
            await ctx.fail(type(error).__name__, message)
            return
        try:
            await ctx.complete(result)
        except (TypeError, ValueError, psycopg.DataError) as refused:
            # Not JSON (a set, an object), or JSON that jsonb refuses (NaN,
            # \u0000): the complete never reached the run, so fail it instead.
            await ctx.fail("result_not_json",
                           f"the handler's result ({type(result).__name__}) cannot be stored"
                           f" as jsonb: {refused}")

    async def in_thread(self, handler: Callable[[RunContext], Any],
                        ctx: RunContext) -> tuple[Any, BaseException | None]:
        """The handler's result or exception, from a daemon thread of its own
        (a handler that never returns must not keep the process alive)."""
        outcome: asyncio.Future[tuple[Any, BaseException | None]] = self.loop.create_future()

        def settle(value: tuple[Any, BaseException | None]) -> None:
            if not outcome.done():
                outcome.set_result(value)

        def body() -> None:
            try:
                value: tuple[Any, BaseException | None] = (handler(ctx), None)
            except BaseException as error:
                value = (None, error)
            with contextlib.suppress(RuntimeError):  # the pool's loop is gone
                self.loop.call_soon_threadsafe(settle, value)

        threading.Thread(target=body, name=f"runq-run-{ctx.run_id}", daemon=True).start()
        return await outcome

    async def release(self, state: _Run, patience: float | None = None) -> None:
        """Give the run back (shutdown): its last write."""
        await self.write(state, lambda c: c.release(state.run_id, state.epoch), final=True,
                         patience=patience)

    # -- wake-ups, sweeps -------------------------------------------------------

    async def listen_loop(self) -> None:
        link = _Link(self.pool.conninfo, self.pool._connect_kwargs("runq-pool-listen"))
        try:
            conn = await link.connection()
            await conn.execute("LISTEN runq")
            while True:
                async for _ in conn.notifies(timeout=self.pool.poll_interval, stop_after=1):
                    self.wake.set()
                    self.wake = asyncio.Event()
                if link.lost:
                    raise psycopg.OperationalError("the LISTEN connection broke")
        finally:
            await link.close()

    async def sweep_loop(self) -> None:
        assert self.pool.sweep_interval
        while True:
            await asyncio.sleep(self.pool.sweep_interval)
            async with self.db.connection() as conn:
                for action in await AsyncClient(conn).sweep():
                    log.info("sweep: run %s %s", action.run_id, action.action)

    async def tick_loop(self) -> None:
        assert self.pool.tick_interval
        while True:
            # A full batch may leave more slots due: tick again at once.
            while await self.tick() == TICK_BATCH:
                pass
            await asyncio.sleep(self.pool.tick_interval)

    async def tick(self) -> int:
        """One runq.tick; how many schedules it handled."""
        async with self.db.connection() as conn:
            rows = await AsyncClient(conn).tick(TICK_BATCH)
        for row in rows:
            (log.debug if row.outcome == "created" else log.info)(
                "tick: schedule %s, slot %s: %s (run %s)", row.schedule, row.slot.isoformat(),
                row.outcome, row.run_id)
        return len({row.schedule for row in rows})

    # -- lifecycle ----------------------------------------------------------------

    async def guarded(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        # Nothing may silently shrink the pool: whatever a loop raises is
        # logged and the loop starts again after a pause that grows while
        # the failures go on. The queue's state is all in the database.
        pause = self.pool.poll_interval
        while True:
            started = time.monotonic()
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if time.monotonic() - started > 60:  # a new bout of failures
                    pause = self.pool.poll_interval
                if isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError)):
                    # The database went away (a restart, a terminated
                    # backend): expected, and no traceback would help.
                    log.warning("%s: %s; reconnecting in %.1f s", name, error, pause)
                else:
                    log.exception("%s failed; starting it again in %.1f s", name, pause)
                if not name.startswith("slot"):
                    await asyncio.sleep(pause)  # heartbeats and the rest go on through the grace
                elif await _first(pause, self.stopping):
                    return
                pause = min(pause * 2, 30.0)

    async def main(self) -> None:
        await self.db.open(wait=False)
        pool = self.pool
        slots = [_SlotState(s) for s in pool._slots]
        claimers = [asyncio.ensure_future(self.guarded(f"slot{list(s.classes)}", self.claimer(s)))
                    for s in slots]
        helpers = [asyncio.ensure_future(self.guarded(name, loop)) for name, loop in [
            ("heartbeat", self.heartbeat_loop), ("listen", self.listen_loop),
            ("complete", self.complete_loop),
            *([("sweep", self.sweep_loop)] if pool.sweep_interval else []),
            *([("tick", self.tick_loop)] if pool.tick_interval else [])]]
        try:
            await self.stopping.wait()
            grace_ends = time.monotonic() + pool.grace
            # Claims on their way land (and are released), then the handlers
            # get what is left of the grace; the heartbeats go on meanwhile.
            await asyncio.wait(claimers, timeout=pool.grace)
            while self.tasks and time.monotonic() < grace_ends:
                await asyncio.wait(list(self.tasks), timeout=grace_ends - time.monotonic())
            await self.release_leftover()
        finally:
            for task in [*claimers, *helpers, *self.tasks, *self.side_tasks]:
                task.cancel()
            try:
                await asyncio.wait_for(self.db.close(timeout=0.5), 1.0)
            except Exception:
                log.debug("closing the connection pool failed", exc_info=True)

    async def release_leftover(self) -> None:
        give_up = time.monotonic() + RELEASE_PATIENCE

        async def release(state: _Run) -> None:
            try:
                await self.release(state, patience=max(0.0, give_up - time.monotonic()))
                log.info("released run %s (epoch %s)", state.run_id, state.epoch)
            except RunStopped:
                pass  # finished, fenced or gone meanwhile: nothing to give back
            except Exception as error:
                log.warning("could not release run %s (epoch %s): %s; its lease will expire",
                            state.run_id, state.epoch, error)

        leftover = [s for s in self.runs.values() if not s.closed]
        if not leftover:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*(release(s) for s in leftover)),
                                   RELEASE_PATIENCE)
        except asyncio.TimeoutError:
            log.warning("gave up releasing after %.0f s: the runs left keep their leases"
                        " until they expire", RELEASE_PATIENCE)


class _ConnectionLost(Exception):
    pass


class _OutOfReach(psycopg.OperationalError):
    """No connection would carry the call for its whole patience."""


def _on_client(call: Callable[[AsyncClient], Awaitable[T]]
               ) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]:
    return lambda conn: call(AsyncClient(conn))


async def _all_set(events: Sequence[asyncio.Event], timeout: float) -> None:
    """Wait until every event is set, for at most timeout seconds."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), timeout)


def _settle(answer: asyncio.Future[bool], value: bool = False,
            error: BaseException | None = None) -> None:
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(value)


async def _first(timeout: float, *events: asyncio.Event) -> bool:
    """Wait until one of the events is set, for at most timeout seconds;
    whether one was."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        return bool(done)
    finally:
        for w in waiters:
            w.cancel()


@dataclass
class WorkerPool:
    conninfo: str
    handlers: Mapping[str, Handler]
    slots: Sequence[Slot | tuple[Sequence[int], int]]
    lease: timedelta = timedelta(seconds=30)
    poll_interval: float = 1.0
    sweep_interval: float | None = 5.0
    # Seconds between ticks of the schedules (runq.tick); None: no ticks.
    tick_interval: float | None = 5.0
    grace: float = 10.0
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    connect_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # The connections the runs' writes, the claims and the sweeps share; the
    # pool holds two more (heartbeats, LISTEN).
    max_connections: int = 4
    # How long an async handler whose run was stopped may go on before its
    # task is cancelled.
    stop_grace: float = 5.0

    def __post_init__(self) -> None:
        if not self.handlers:
            raise ValueError("a worker pool needs at least one handler")
        for name in ("sweep_interval", "tick_interval"):
            interval = getattr(self, name)
            if interval is not None and not interval > 0:
                raise ValueError(f"{name} must be more than 0 s (None: never), got {interval}")
        self._slots = [s if isinstance(s, Slot) else Slot(tuple(s[0]), s[1]) for s in self.slots]
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._core: _Core | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Start the pool's event loop in a thread of its own."""
        self._thread = threading.Thread(target=self._serve, name="runq-pool", daemon=True)
        self._thread.start()
        self._started.wait()

    def _serve(self) -> None:
        async def serve() -> None:
            self._core = _Core(self)
            self._started.set()
            if self._stopping.is_set():
                self._core.stopping.set()
            await self._core.main()
        try:
            asyncio.run(serve())
        except Exception:
            log.exception("the worker pool's loop failed")
        finally:
            self._started.set()
            self._stopping.set()

    def stop(self) -> None:
        """Stop claiming; ``join`` then gives in-flight runs their grace.
        From any thread."""
        self._stopping.set()
        core = self._core
        if core is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended
                core.loop.call_soon_threadsafe(core.stopping.set)

    def join(self) -> None:
        """Wait for stop(), then for the handlers up to ``grace`` seconds,
        then for the releases of what is still in flight, for at most
        RELEASE_PATIENCE seconds more. Never raises: a run it cannot release
        is logged, and its lease expires as a dead worker's would."""
        # A timed wait: a signal that another thread of the process received
        # runs its handler (stop()) only once the main thread runs Python
        # code again, which an untimed wait would never let it do.
        while not self._stopping.wait(0.2):
            pass
        if self._thread is not None:
            self._thread.join(self.grace + RELEASE_PATIENCE + 0.5)
            if self._thread.is_alive():
                log.warning("the pool did not end in time; leaving it behind")

    def run(self) -> None:
        """start(), stop on SIGTERM or SIGINT, join()."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        self.start()
        self.join()

    def inflight(self) -> list[int]:
        """The runs whose leases the pool keeps. From any thread."""
        core = self._core
        return sorted(core.runs) if core is not None else []

    def _connect_kwargs(self, application_name: str) -> dict[str, Any]:
        # No server-side prepared statements: behind PgBouncer in transaction
        # mode they land on another server connection. They would save little:
        # each call is one function call, whose plans the server caches.
        # A server that vanished without closing the socket (a host gone, a
        # network cut) is noticed in seconds, not at TCP's fifteen minutes.
        return {"application_name": application_name, "prepare_threshold": None,
                "autocommit": True, "connect_timeout": 5, "keepalives": 1,
                "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
                "tcp_user_timeout": 10_000, **self.connect_kwargs}


# -- runq worker ------------------------------------------------------------------


def _slot(text: str) -> Slot:
    """``0,10:4`` -> Slot((0, 10), 4)."""
    try:
        classes, _, count = text.partition(":")
        return Slot(tuple(int(c) for c in classes.split(",")), int(count or 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a slot is CLASSES[:COUNT], like 0,10:4; got {text!r}")\
            from None


def _seconds(text: str) -> float:
    """An argparse type: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``runq worker MODULE``: a pool running the handlers MODULE.HANDLERS
    (a mapping of run kind to handler, ``def`` or ``async def``) until
    SIGTERM or SIGINT."""
    ap = argparse.ArgumentParser(prog="runq worker", description=main.__doc__)
    ap.add_argument("module", help="module with HANDLERS = {kind: handler}")
    ap.add_argument("--database-url", default=os.environ.get("RUNQ_DATABASE_URL"))
    ap.add_argument("--slot", dest="slots", type=_slot, action="append",
                    help="CLASSES[:COUNT], repeatable (default: 0:1 and 0,10,20:2)")
    ap.add_argument("--lease", type=float, default=30.0, help="lease in seconds")
    ap.add_argument("--poll", type=float, default=1.0, help="poll interval in seconds")
    ap.add_argument("--sweep-every", type=_seconds, default=5.0, help="0: do not sweep")
    ap.add_argument("--tick-every", type=_seconds, default=5.0,
                    help="seconds between ticks of the schedules; 0: do not tick")
    ap.add_argument("--grace", type=float, default=10.0, help="seconds to finish on shutdown")
    ap.add_argument("--connections", type=int, default=4,
                    help="connections the runs share (the pool holds 2 more)")
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
                      sweep_interval=opts.sweep_every or None,
                      tick_interval=opts.tick_every or None, grace=opts.grace,
                      max_connections=opts.connections,
                      **({"worker_id": opts.worker_id} if opts.worker_id else {}))
    pool.run()
    return 0


if __name__ == "__main__":
    # `python -m runq.pool` runs this file as __main__, a second copy of the
    # module: its RunStopped would not be the one handlers import and catch.
    from runq.pool import main as _main

    sys.exit(_main())
