"""A run's fenced writes: the first ``false`` stops the run, and from then on
every write raises RunStopped (saying why, read once) instead of going out."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from runq.client import AsyncClient, json_text
from runq.errors import RunNotFound, RunStopped
from runq.worker.links import OutOfReach, on_client
from runq.worker.log import log
from runq.worker.state import RunState, stop_reason
from runq.worker.waits import all_set

if TYPE_CHECKING:
    from runq.worker.core import Core

# How long reading why a run stopped may take before the reason is "fenced".
REASON_PATIENCE = 5.0


class Writes:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.db = core.db

    async def write(self, state: RunState, call: Callable[[AsyncClient], Awaitable[bool]] | None,
                    *, final: bool = False, result: Any = None, patience: float | None = None,
                    landed: Callable[[AsyncClient], Awaitable[bool]] | None = None) -> None:
        """One fenced write of a run; call None is its completion."""
        if (final or call is None) and not state.closed:
            await self.core.emits.flush(state)  # its output goes before its end
        if state.closed:
            raise await self.refusal(state, "is no longer ours")
        try:
            if call is None:
                applied = await self.core.completions.complete(state, result)
            else:
                if final:
                    # The last write waits out a heartbeat already sent, so
                    # that the heartbeat cannot land after it and log run.fenced.
                    state.finish()
                    await all_set([state.not_beating], self.core.lease if patience is None
                                  else patience)
                probe = None if landed is None else on_client(landed)
                applied = await self.db.persist(on_client(call), patience, probe)
        except RunNotFound:
            state.stop()
            state.reason = "not_found"
            raise RunStopped(f"run {state.run_id} no longer exists", "not_found") from None
        except asyncio.CancelledError:
            # Cancelled on its way: it may still land, so nothing may follow it.
            raise
        except BaseException as error:
            state.write_failed(final, isinstance(error, OutOfReach))
            raise
        if not applied:
            self.core.stop_run(state)
            raise await self.refusal(state, "was fenced or cancelled")

    def finished(self, state: RunState, status: str) -> None:
        """Tells the pool's on_finished that runq acknowledged the run's end,
        whoever sent it: the handler's own ctx.complete or ctx.fail, or the
        pool's with what the handler returned or raised."""
        hook = self.core.pool.on_finished
        if hook is None:
            return
        try:
            hook(state.run_id, state.epoch, status)
        except Exception:  # the run has ended either way
            log.exception("run %s: on_finished raised", state.run_id)

    async def spawn(self, state: RunState,
                    call: Callable[[AsyncClient], Awaitable[int | None]]) -> int:
        """runq.spawn under the run's epoch, as a fenced write: the child's
        run_id, and NULL (fenced, cancelled, past the deadline) stops the run
        as a false answer does. Sent again after a lost connection, the same
        key by the same epoch is the same child: nothing is created twice."""
        child: int | None = None

        async def spawned(c: AsyncClient) -> bool:
            nonlocal child
            child = await call(c)
            return child is not None

        await self.write(state, spawned)
        assert child is not None  # write raised otherwise
        return child

    async def emit(self, state: RunState, chunk: Any) -> None:
        """Buffer a chunk of the run's output (see runq.worker.emits)."""
        json_text(chunk)  # not JSON: raised here, in the handler
        if state.closed:
            raise await self.refusal(state, "is no longer ours")
        self.core.emits.add(state, chunk)

    async def release(self, state: RunState, patience: float | None = None) -> None:
        """Give the run back (shutdown): its last write."""
        async def landed(c: AsyncClient) -> bool:
            # A release that landed took the lease-expiry path: queued, or
            # failed or cancelled by its policy, deadline or cancel flag, or
            # claimed again since. Only a run still ours did not get it.
            run = await c.get_run(state.run_id)
            return not (run.status == "running" and run.lease_epoch == state.epoch)
        await self.write(state, lambda c: c.release(state.run_id, state.epoch), final=True,
                         patience=patience, landed=landed)

    async def refusal(self, state: RunState, why: str) -> RunStopped:
        """The RunStopped for a write refused; why the run stopped is read
        once, the first time (a run closed by its own last write needs no
        read)."""
        if state.stopped and state.reason is None:
            state.reason, state.reason_message = await self.read_reason(state)
        return state.refused(why)

    async def read_reason(self, state: RunState) -> tuple[str, str | None]:
        try:
            run = await self.db.persist(on_client(lambda c: c.get_run(state.run_id)),
                                        patience=min(self.core.lease, REASON_PATIENCE))
        except RunNotFound:
            return "not_found", None
        except Exception as error:  # the database is out of reach: all we know
            log.info("run %s: could not read why it stopped: %s", state.run_id, error)
            return "fenced", None
        return stop_reason(run, state.epoch)

    async def record_model_call(self, state: RunState, seq: int, request_hash: str,
                                response: Any, usage: Mapping[str, Any] | None) -> bool:
        """runq.record_model_call under the run's epoch, whatever the run's
        state, as record_usage is sent; it is idempotent, so a call lost with
        its connection is simply sent again."""
        try:
            ours = await self.db.persist(on_client(lambda c: c.record_model_call(
                state.run_id, state.epoch, seq, request_hash, response, usage)))
        except RunNotFound:
            state.stop()
            state.reason = "not_found"
            raise RunStopped(f"run {state.run_id} no longer exists: its model call was not"
                             " recorded", "not_found") from None
        if not ours and not state.closed:
            self.core.stop_run(state)
        return ours

    async def record_usage(self, state: RunState, usage: Mapping[str, Any]) -> bool:
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
            ours = await self.db.persist(
                on_client(lambda c: c.record_usage(state.run_id, state.epoch, usage)),
                landed=on_client(landed))
        except RunNotFound:
            state.stop()
            state.reason = "not_found"
            raise RunStopped(f"run {state.run_id} no longer exists: its usage was not"
                             " recorded", "not_found") from None
        state.usage_landed[key] += 1
        if not ours and not state.closed:
            self.core.stop_run(state)
        return ours
