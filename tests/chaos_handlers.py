"""Handlers and controls for tests/test_pool_chaos.py.

Each kind has two handlers of the same behaviour: a ``def`` one in HANDLERS
(the pool runs it in a thread of its own) and an ``async def`` twin in
ASYNC_HANDLERS (awaited on the pool's event loop). They run inside the test
process, so the test steers them through this module's registries:

    gate(name)      a threading.Event a handler waits on (payload "gate");
                    the test sets it to let the handler go on
    NOTES[name]     what a handler observed (payload "note"), for the test
    PROBES[group]   a Meeting the probe runs of one after-check meet at:
                    one run per slot, so a run can only pass it while every
                    other probe is held by another slot

A sync handler blocks on a threading.Event; an async one polls it between
short sleeps, so it never blocks the loop the pool's own work runs on (and
a cancel reaches it at its next sleep). Every wait has a timeout (WAIT), so
a failed test never leaves a handler waiting for good; the tests open their
gates when they end in any case.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from runq.pool import AsyncRunContext, RunContext

WAIT = 60.0  # seconds: the longest any handler blocks
POLL = 0.01  # seconds between an async handler's looks at its event

_gates: dict[str, threading.Event] = {}
_gates_lock = threading.Lock()
NOTES: dict[str, list[Any]] = {}


class Meeting:
    """A barrier for handlers of either flavour: each probe arrives, then
    waits until ``parties`` have (a thread blocks, a coroutine polls)."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.everyone = threading.Event()
        self._arrived = 0
        self._lock = threading.Lock()

    def arrive(self) -> threading.Event:
        with self._lock:
            self._arrived += 1
            if self._arrived >= self.parties:
                self.everyone.set()
        return self.everyone

    def missed(self) -> TimeoutError:
        return TimeoutError(f"only {self._arrived} of {self.parties} probes met")


PROBES: dict[str, Meeting] = {}


def gate(name: str) -> threading.Event:
    """The event called ``name`` (created on first use)."""
    with _gates_lock:
        return _gates.setdefault(name, threading.Event())


def open_gates(prefix: str) -> None:
    """Set every gate whose name starts with ``prefix``."""
    with _gates_lock:
        events = [e for n, e in _gates.items() if n.startswith(prefix)]
    for event in events:
        event.set()


def note(ctx: RunContext | AsyncRunContext, what: Any) -> None:
    NOTES.setdefault(str(ctx.run.payload["note"]), []).append(what)


def _wait(ctx: RunContext) -> None:
    if not gate(str(ctx.run.payload["gate"])).wait(WAIT):
        raise TimeoutError(f"gate {ctx.run.payload['gate']} never opened")


async def _until_set(event: threading.Event, timeout: float) -> bool:
    """event.wait(timeout) for a coroutine: the loop goes on meanwhile."""
    deadline = time.monotonic() + timeout
    while not event.is_set():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL)
    return True


async def _await_gate(ctx: AsyncRunContext) -> None:
    if not await _until_set(gate(str(ctx.run.payload["gate"])), WAIT):
        raise TimeoutError(f"gate {ctx.run.payload['gate']} never opened")


# -- handlers that misbehave ------------------------------------------------------


def returns_set(ctx: RunContext) -> set[int]:
    """A result JSON cannot encode at all."""
    return {1, 2, 3}


def returns_nan(ctx: RunContext) -> float:
    """A result json.dumps encodes as NaN, which is not JSON (PostgreSQL refuses it)."""
    return float("nan")


class Boom(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit."""


def raises_boom(ctx: RunContext) -> None:
    raise Boom("the handler blew up")


def raises_generator_exit(ctx: RunContext) -> None:
    raise GeneratorExit("the generator was closed under the handler")


# -- handlers the test holds --------------------------------------------------------


def waits(ctx: RunContext) -> dict[str, Any]:
    """Blocks on its gate, writes nothing, then returns; notes that it returned
    (and whether the run was still its own)."""
    try:
        _wait(ctx)
    finally:
        if "note" in ctx.run.payload:
            note(ctx, ("returned", ctx.stop_requested))
    return {"waited": True}


def waits_then_checkpoints(ctx: RunContext) -> dict[str, Any]:
    """Blocks on its gate, then writes a checkpoint and returns. Notes what the
    write met: "written", or the exception's class name (RunStopped for a run
    that is no longer ours), along with stop_requested before the write."""
    _wait(ctx)
    before = ctx.stop_requested
    try:
        ctx.checkpoint({"step": 1, "epoch": ctx.epoch})
    except BaseException as error:
        note(ctx, (before, type(error).__name__))
        raise
    note(ctx, (before, "written"))
    return {"epoch": ctx.epoch}


def pauses_between_checkpoints(ctx: RunContext) -> dict[str, Any]:
    """Checkpoint, block on the gate, checkpoint again, return the epoch.
    Every write of it raises into the handler if the pool lets it."""
    ctx.checkpoint({"step": 1, "epoch": ctx.epoch})
    _wait(ctx)
    ctx.checkpoint({"step": 2, "epoch": ctx.epoch})
    return {"epoch": ctx.epoch}


def interrupts_first_claim(ctx: RunContext) -> dict[str, Any]:
    """Under its first epoch raises the payload's "raise", SystemExit or
    KeyboardInterrupt, as a handler that calls sys.exit() or meets ^C does;
    claimed again, returns its epoch."""
    if ctx.epoch == 1:
        if ctx.run.payload["raise"] == "SystemExit":
            raise SystemExit("the handler called sys.exit()")
        raise KeyboardInterrupt
    return {"epoch": ctx.epoch}


def uses_tool(ctx: RunContext) -> dict[str, Any]:
    """begin_tool, then end_tool of the payload's "call_id"; notes what
    end_tool met ("written", or the exception's class name). With "probe":
    false in the payload it sends end_tool as RunContext.end_tool does but
    without the ``landed`` probe, as a pool without it would."""
    call_id = str(ctx.run.payload["call_id"])
    outcome = {"hits": 3}
    ctx.begin_tool(call_id, "search", "idempotent", {"q": "runq"})
    try:
        if ctx.run.payload.get("probe", True):
            ctx.end_tool(call_id, outcome)
        else:
            ctx._write(lambda c: c.end_tool(ctx.run_id, ctx.epoch, call_id, outcome))
    except BaseException as error:
        note(ctx, type(error).__name__)
        raise
    note(ctx, "written")
    return {"epoch": ctx.epoch}


# -- well-behaved ones ------------------------------------------------------------------


def quick(ctx: RunContext) -> dict[str, Any]:
    return {"ok": True, "epoch": ctx.epoch}


def probe(ctx: RunContext) -> dict[str, Any]:
    """Meets the other probes of its group: passes only when every one of them
    is held by a slot at the same time. Fails (TimeoutError) otherwise.
    "holder": the thread that ran it."""
    meeting = PROBES[str(ctx.run.payload["group"])]
    if not meeting.arrive().wait(10):
        raise meeting.missed()
    return {"holder": threading.current_thread().name, "at": time.monotonic()}


HANDLERS = {
    "returns.set": returns_set,
    "returns.nan": returns_nan,
    "raises.boom": raises_boom,
    "raises.generator_exit": raises_generator_exit,
    "waits": waits,
    "waits.then_checkpoints": waits_then_checkpoints,
    "pauses": pauses_between_checkpoints,
    "interrupts.once": interrupts_first_claim,
    "uses.tool": uses_tool,
    "quick": quick,
    "probe": probe,
}


# -- the async twins: the same behaviour, awaited on the pool's loop ----------------------


async def returns_set_async(ctx: AsyncRunContext) -> set[int]:
    return {1, 2, 3}


async def returns_nan_async(ctx: AsyncRunContext) -> float:
    return float("nan")


async def raises_boom_async(ctx: AsyncRunContext) -> None:
    raise Boom("the handler blew up")


async def raises_generator_exit_async(ctx: AsyncRunContext) -> None:
    raise GeneratorExit("the generator was closed under the handler")


async def waits_async(ctx: AsyncRunContext) -> dict[str, Any]:
    """waits(), awaiting its gate: notes ("returned", stop_requested), or
    ("cancelled", stop_requested) when the pool cancels it meanwhile (a
    thread cannot be cancelled, a coroutine can)."""
    outcome = "returned"
    try:
        await _await_gate(ctx)
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        if "note" in ctx.run.payload:
            note(ctx, (outcome, ctx.stop_requested))
    return {"waited": True}


async def waits_then_checkpoints_async(ctx: AsyncRunContext) -> dict[str, Any]:
    await _await_gate(ctx)
    before = ctx.stop_requested
    try:
        await ctx.checkpoint({"step": 1, "epoch": ctx.epoch})
    except BaseException as error:
        note(ctx, (before, type(error).__name__))
        raise
    note(ctx, (before, "written"))
    return {"epoch": ctx.epoch}


async def pauses_between_checkpoints_async(ctx: AsyncRunContext) -> dict[str, Any]:
    await ctx.checkpoint({"step": 1, "epoch": ctx.epoch})
    await _await_gate(ctx)
    await ctx.checkpoint({"step": 2, "epoch": ctx.epoch})
    return {"epoch": ctx.epoch}


async def interrupts_first_claim_async(ctx: AsyncRunContext) -> dict[str, Any]:
    """Raises SystemExit or KeyboardInterrupt from the coroutine."""
    if ctx.epoch == 1:
        if ctx.run.payload["raise"] == "SystemExit":
            raise SystemExit("the handler called sys.exit()")
        raise KeyboardInterrupt
    return {"epoch": ctx.epoch}


async def uses_tool_async(ctx: AsyncRunContext) -> dict[str, Any]:
    call_id = str(ctx.run.payload["call_id"])
    outcome = {"hits": 3}
    await ctx.begin_tool(call_id, "search", "idempotent", {"q": "runq"})
    try:
        if ctx.run.payload.get("probe", True):
            await ctx.end_tool(call_id, outcome)
        else:
            await ctx._write(lambda c: c.end_tool(ctx.run_id, ctx.epoch, call_id, outcome))
    except BaseException as error:
        note(ctx, type(error).__name__)
        raise
    note(ctx, "written")
    return {"epoch": ctx.epoch}


async def quick_async(ctx: AsyncRunContext) -> dict[str, Any]:
    return {"ok": True, "epoch": ctx.epoch}


async def probe_async(ctx: AsyncRunContext) -> dict[str, Any]:
    """probe(); "holder": the task that ran it (every task runs on the
    pool's one loop thread)."""
    meeting = PROBES[str(ctx.run.payload["group"])]
    if not await _until_set(meeting.arrive(), 10):
        raise meeting.missed()
    task = asyncio.current_task()
    return {"holder": task.get_name() if task else "?", "at": time.monotonic()}


ASYNC_HANDLERS = {
    "returns.set": returns_set_async,
    "returns.nan": returns_nan_async,
    "raises.boom": raises_boom_async,
    "raises.generator_exit": raises_generator_exit_async,
    "waits": waits_async,
    "waits.then_checkpoints": waits_then_checkpoints_async,
    "pauses": pauses_between_checkpoints_async,
    "interrupts.once": interrupts_first_claim_async,
    "uses.tool": uses_tool_async,
    "quick": quick_async,
    "probe": probe_async,
}

assert ASYNC_HANDLERS.keys() == HANDLERS.keys()

__all__ = ["ASYNC_HANDLERS", "HANDLERS", "NOTES", "PROBES", "Boom", "Meeting", "gate",
           "open_gates"]
