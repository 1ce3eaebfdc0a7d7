"""The pool's event loop side: what its parts share, the runs in flight, and
the loops it starts and keeps going."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import psycopg

from runq.worker.claims import Claims
from runq.worker.completions import Completions
from runq.worker.emits import Emits
from runq.worker.handling import Handling
from runq.worker.heartbeats import Heartbeats
from runq.worker.links import Database
from runq.worker.log import log
from runq.worker.shutdown import wind_down
from runq.worker.state import RunState, SlotState
from runq.worker.upkeep import Upkeep
from runq.worker.waits import first
from runq.worker.writes import Writes

if TYPE_CHECKING:
    from runq.worker.workerpool import WorkerPool


class Core:
    """Made on the pool's event loop, and touched there only; its parts
    reach each other through it."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.loop = asyncio.get_running_loop()
        self.lease = pool.lease.total_seconds()
        self.stopping = asyncio.Event()
        self.runs: dict[int, RunState] = {}
        self.tasks: set[asyncio.Future[None]] = set()
        # A quarter of the heartbeat interval: see heartbeats.HEARTBEAT_MANY.
        self.lock_timeout = f"{max(1, int(self.lease / 3 * 1000 / 4))}ms"
        self.db = Database(pool.conninfo, pool.max_connections,
                           pool._connect_kwargs("runq-pool"), self.lease)
        self.completions = Completions(self)
        self.emits = Emits(self)
        self.writes = Writes(self)
        self.heartbeats = Heartbeats(self)
        self.claims = Claims(self)
        self.handling = Handling(self)
        self.upkeep = Upkeep(self)

    def stop_run(self, state: RunState) -> None:
        """The run is no longer ours: no write goes out for it any more, its
        lease is no longer kept, and an async handler still at it is
        cancelled after stop_grace."""
        state.stop()
        self.forget(state)
        task = state.task
        if task is not None and not task.done() and state.cancellable:
            self.loop.call_later(self.pool.stop_grace, task.cancel)

    def forget(self, state: RunState) -> None:
        if self.runs.get(state.run_id) is state:
            del self.runs[state.run_id]

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
                elif await first(pause, self.stopping):
                    return
                pause = min(pause * 2, 30.0)

    def claimer(self, slot: SlotState) -> Callable[[], Awaitable[None]]:
        return lambda: self.claims.slot_loop(slot)

    async def main(self) -> None:
        await self.db.open()
        pool = self.pool
        slots = [SlotState(s) for s in pool._slots]
        claimers = [asyncio.ensure_future(self.guarded(f"slot{list(s.classes)}", self.claimer(s)))
                    for s in slots]
        helpers = [asyncio.ensure_future(self.guarded(name, loop)) for name, loop in [
            ("heartbeat", self.heartbeats.loop), ("listen", self.claims.listen_loop),
            ("complete", self.completions.loop),
            ("emit", self.emits.loop),
            *([("sweep", self.upkeep.sweep_loop)] if pool.sweep_interval else []),
            *([("tick", self.upkeep.tick_loop)] if pool.tick_interval else [])]]
        try:
            await self.stopping.wait()
            await wind_down(self, claimers)
        finally:
            for task in [*claimers, *helpers, *self.tasks, *self.completions.side_tasks]:
                task.cancel()
            await self.db.close()
