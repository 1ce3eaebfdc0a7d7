"""One claimed run, from its handler to its last write: a handler that
returns completes the run, one that raises fails it, and a run the pool is
stopping for is given back."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import psycopg

from runq.errors import RunStopped
from runq.worker.context import AsyncRunContext, Handler, RunContext, is_async
from runq.worker.log import log
from runq.worker.state import RunState

if TYPE_CHECKING:
    from runq.worker.core import Core


class Handling:
    def __init__(self, core: Core) -> None:
        self.core = core

    async def execute(self, state: RunState) -> None:
        core = self.core
        try:
            handler = core.pool.handlers.get(state.run.kind)
            if core.stopping.is_set():
                await core.writes.release(state)
            elif handler is None:  # claimed by kind, so only if handlers changed since
                log.error("run %s: no handler for kind %s; releasing it", state.run_id,
                          state.run.kind)
                await core.writes.release(state)
            else:
                await self.handle(state, handler)
        except RunStopped:
            pass
        except asyncio.CancelledError:  # stopped, or the pool stopped: its run is not ours
            log.info("run %s (epoch %s): its handler was cancelled", state.run_id, state.epoch)
        except Exception:  # about this run only: the pool goes on
            log.exception("run %s (epoch %s): its last write failed", state.run_id, state.epoch)
        finally:
            core.forget(state)
            state.slot.busy -= 1
            state.slot.freed.set()

    async def handle(self, state: RunState, handler: Handler) -> None:
        core = self.core
        ctx = AsyncRunContext(core.writes, state)
        result: Any = None
        error: BaseException | None = None
        if is_async(handler):
            state.cancellable = True
            try:
                result = await cast(Callable[[AsyncRunContext], Awaitable[Any]], handler)(ctx)
            except asyncio.CancelledError:
                raise
            except BaseException as raised:  # the handler's failure is the run's
                error = raised
        else:
            result, error = await self.in_thread(cast(Callable[[RunContext], Any], handler),
                                                 RunContext(ctx, core.loop))
        if isinstance(error, RunStopped):
            return
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            log.warning("run %s: the handler raised %r; releasing it and stopping the pool",
                        state.run_id, error)
            core.pool.stop()
            await core.writes.release(state)
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
        loop = self.core.loop
        outcome: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()

        def settle(value: tuple[Any, BaseException | None]) -> None:
            if not outcome.done():
                outcome.set_result(value)

        def body() -> None:
            try:
                value: tuple[Any, BaseException | None] = (handler(ctx), None)
            except BaseException as error:
                value = (None, error)
            with contextlib.suppress(RuntimeError):  # the pool's loop is gone
                loop.call_soon_threadsafe(settle, value)

        threading.Thread(target=body, name=f"runq-run-{ctx.run_id}", daemon=True).start()
        return await outcome
