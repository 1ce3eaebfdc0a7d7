"""What a handler gets: its claimed run and the run's fenced writes, awaited
(AsyncRunContext) or from a thread of its own (RunContext)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from runq.client import AsyncClient
from runq.errors import RunStopped
from runq.types import ChildRun, ClaimedRun, ModelCall, ToolCall
from runq.worker.links import on_client
from runq.worker.state import RunState

if TYPE_CHECKING:
    from runq.worker.writes import Writes

T = TypeVar("T")


class AsyncRunContext:
    """What an async handler gets: the claimed run and its fenced writes,
    awaited. Every write raises RunStopped instead of returning ``false``,
    so a handler cannot carry on by accident after losing its run."""

    def __init__(self, writes: Writes, state: RunState) -> None:
        self._writes = writes
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
        return await self._writes.record_usage(self._state, usage)

    async def record_model_call(self, seq: int, request_hash: str, response: Any,
                                usage: Mapping[str, int | float | Decimal] | None = None) -> bool:
        """Journal model request seq (1, 2, ... in the order this run's loop
        sends them), its response and what it cost, after it
        (runq.record_model_call): the usage is added to the run's totals in
        the same transaction. Sent as record_usage is, even once the run is
        no longer ours: True while it is (a later attempt replays response),
        False when not (the run is then stopped)."""
        return await self._writes.record_model_call(self._state, seq, request_hash, response,
                                                    usage)

    async def model_calls(self) -> list[ModelCall]:
        """The run's journaled model requests (runq.model_calls)."""
        return await self._writes.db.persist(on_client(lambda c: c.model_calls(self.run_id)))

    async def emit(self, chunk: Any) -> None:
        """Append chunk (a JSON value: a token, a progress note) to the run's
        output (runq.emit), for readers of Client.stream. Buffered, and sent
        with other chunks a few milliseconds later (runq.worker.emits), and
        before the run's complete, fail, ask_user or wait_children; a refusal
        stops the run (the next write raises RunStopped). Raises TypeError for
        a chunk that is not JSON, RunStopped once the run is no longer ours."""
        await self._writes.emit(self._state, chunk)

    async def _write(self, call: Callable[[AsyncClient], Awaitable[bool]], **how: Any) -> None:
        await self._writes.write(self._state, call, **how)

    async def checkpoint(self, state: Any) -> None:
        await self._write(lambda c: c.checkpoint(self.run_id, self.epoch, state))

    async def begin_turn(self) -> None:
        await self._writes.write(self._state, lambda c: c.begin_turn(self.run_id, self.epoch))

    async def begin_tool(self, call_id: str, tool: str, idempotency: str,
                         args: Mapping[str, Any] | None = None) -> None:
        await self._writes.write(self._state, lambda c: c.begin_tool(
            self.run_id, self.epoch, call_id, tool, idempotency, args))

    async def end_tool(self, call_id: str, outcome: Any) -> None:
        # Sent again after it committed, end_tool would raise RQ004 (the call
        # is finished): ask first.
        async def landed(c: AsyncClient) -> bool:
            return any(t.call_id == call_id and t.status == "finished" and t.epoch == self.epoch
                       for t in await c.tool_calls(self.run_id))
        await self._writes.write(self._state, lambda c: c.end_tool(
            self.run_id, self.epoch, call_id, outcome), landed=landed)

    async def tool_calls(self) -> list[ToolCall]:
        """The run's tool calls: which are retryable, which uncertain."""
        return await self._writes.db.persist(on_client(lambda c: c.tool_calls(self.run_id)))

    async def ask_user(self, question: Any) -> None:
        """Wait for the user; the handler should return after this."""
        await self._writes.write(self._state, lambda c: c.ask_user(
            self.run_id, self.epoch, question), final=True,
            landed=self._logged("run.waiting_for_user"))

    async def spawn(self, key: str, kind: str, payload: Mapping[str, Any] | None = None, *,
                    priority: int | None = None, max_attempts: int = 3,
                    recovery_policy: str = "resume", timeout: timedelta | None = None,
                    budget: Mapping[str, int | float | Decimal] | None = None) -> int:
        """Spawn a child run named key among this run's children
        (runq.spawn) and return its run_id. A resumed attempt that spawns
        the same key again gets the same child (the same request, or
        IdempotencyConflict). Raises RunStopped, writing nothing, once the
        run is no longer ours (fenced, cancelled, past its deadline)."""
        return await self._writes.spawn(self._state, lambda c: c.spawn(
            self.run_id, self.epoch, key, kind, payload, priority=priority,
            max_attempts=max_attempts, recovery_policy=recovery_policy, timeout=timeout,
            budget=budget))

    async def wait_children(self) -> None:
        """Wait for the run's children (runq.wait_children); the handler
        should return after this. The run is claimed again, resumed, once
        every child is terminal (at once when none is live): ctx.children()
        then has their results."""
        await self._writes.write(self._state, lambda c: c.wait_children(
            self.run_id, self.epoch), final=True,
            landed=self._logged("run.waiting_for_children", "run.children_done"))

    async def children(self) -> list[ChildRun]:
        """The run's children in spawn order (runq.children): their status,
        result, failure and usage."""
        return await self._writes.db.persist(on_client(lambda c: c.children(self.run_id)))

    def _logged(self, *types: str) -> Callable[[AsyncClient], Awaitable[bool]]:
        """A probe for a last write that was sent again: sent again after it
        committed, it would be refused (the run no longer runs) and log a
        run.fenced. Its event under our epoch says it landed."""
        async def landed(c: AsyncClient) -> bool:
            return any(e.type in types and e.epoch == self.epoch
                       for e in await c.run_events(self.run_id))
        return landed

    async def complete(self, result: Any = None) -> None:
        await self._writes.write(self._state, None, final=True, result=result)
        self._writes.finished(self._state, "succeeded")

    async def fail(self, code: str, message: str | None = None, **details: Any) -> None:
        failure = {"code": code, **({"message": message} if message else {}), **details}

        async def landed(c: AsyncClient) -> bool:
            # Sent again after it committed (a failover can take the answer),
            # fail would be refused and log a run.fenced: ask first.
            run = await c.get_run(self.run_id)
            return (run.status == "failed" and run.lease_epoch == self.epoch
                    and run.failure is not None and run.failure.get("code") == code)
        await self._writes.write(self._state, lambda c: c.fail(self.run_id, self.epoch, failure),
                                 final=True, landed=landed)
        self._writes.finished(self._state, "failed")


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

    def record_model_call(self, seq: int, request_hash: str, response: Any,
                          usage: Mapping[str, int | float | Decimal] | None = None) -> bool:
        return self._wait(self._async.record_model_call(seq, request_hash, response, usage))

    def model_calls(self) -> list[ModelCall]:
        return self._wait(self._async.model_calls())

    def emit(self, chunk: Any) -> None:
        """AsyncRunContext.emit, from the handler's thread."""
        self._wait(self._async.emit(chunk))

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

    def spawn(self, key: str, kind: str, payload: Mapping[str, Any] | None = None, *,
              priority: int | None = None, max_attempts: int = 3,
              recovery_policy: str = "resume", timeout: timedelta | None = None,
              budget: Mapping[str, int | float | Decimal] | None = None) -> int:
        """AsyncRunContext.spawn, from the handler's thread."""
        return self._wait(self._async.spawn(
            key, kind, payload, priority=priority, max_attempts=max_attempts,
            recovery_policy=recovery_policy, timeout=timeout, budget=budget))

    def wait_children(self) -> None:
        """Wait for the run's children; the handler should return after this."""
        self._wait(self._async.wait_children())

    def children(self) -> list[ChildRun]:
        """The run's children in spawn order: their status, result and usage."""
        return self._wait(self._async.children())

    def complete(self, result: Any = None) -> None:
        self._wait(self._async.complete(result))

    def fail(self, code: str, message: str | None = None, **details: Any) -> None:
        self._wait(self._async.fail(code, message, **details))


Handler = Callable[[RunContext], Any] | Callable[[AsyncRunContext], Awaitable[Any]]


def is_async(handler: Handler) -> bool:
    # a function, or an object whose __call__ is one
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None))  # noqa: B004
