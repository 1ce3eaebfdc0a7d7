"""Claims: each slot claims up to its free capacity, of the kinds the pool
has handlers for only, and waits for news (LISTEN runq, or the poll
interval) when nothing more is ready."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import psycopg

from runq.client import AsyncClient
from runq.types import ClaimedRun
from runq.worker.links import Link
from runq.worker.state import RunState, SlotState
from runq.worker.waits import first

if TYPE_CHECKING:
    from runq.worker.core import Core


class Claims:
    def __init__(self, core: Core) -> None:
        self.core = core
        # A rolling deploy never hands a new kind to an old worker.
        self.kinds = sorted(core.pool.handlers)
        # Set, and replaced by a fresh one, on every notification.
        self.wake = asyncio.Event()

    async def slot_loop(self, slot: SlotState) -> None:
        core, pool = self.core, self.core.pool
        while not core.stopping.is_set():
            free = slot.count - slot.busy
            if free <= 0:
                slot.freed.clear()
                await first(pool.poll_interval, slot.freed, core.stopping)
                continue
            wake = self.wake  # before the claim: news during its round trip must count
            async with core.db.connection() as conn:
                runs = await AsyncClient(conn).claim(
                    slot.classes, worker_id=pool.worker_id, lease=pool.lease,
                    max_runs=free, kinds=self.kinds)
            for run in runs:
                self.start(run, slot)
            if core.stopping.is_set():  # stopped while the claim was on its way
                return
            if len(runs) < free:  # nothing more is ready: wait for news
                await first(pool.poll_interval, wake, core.stopping)

    def full(self, slot: SlotState) -> bool:
        """Its loop waits for a place: a completion may claim its next run."""
        return slot.busy >= slot.count and not self.core.stopping.is_set()

    def start(self, run: ClaimedRun, slot: SlotState) -> None:
        core = self.core
        state = RunState(run, slot)
        core.runs[run.run_id] = state
        slot.busy += 1
        task = asyncio.ensure_future(core.handling.execute(state))
        state.task = task
        core.tasks.add(task)
        task.add_done_callback(core.tasks.discard)

    async def listen_loop(self) -> None:
        # Idle slots poll in any case: a PgBouncer in transaction mode drops
        # notifications.
        pool = self.core.pool
        link = Link(pool.conninfo, pool._connect_kwargs("runq-pool-listen"))
        try:
            conn = await link.connection()
            await conn.execute("LISTEN runq")
            while True:
                async for _ in conn.notifies(timeout=pool.poll_interval, stop_after=1):
                    self.wake.set()
                    self.wake = asyncio.Event()
                if link.lost:
                    raise psycopg.OperationalError("the LISTEN connection broke")
        finally:
            await link.close()
