"""The database's upkeep that any pool may do: sweeps (expired leases, queue
TTLs) and ticks of the schedules. Any number of pools may tick: a slot still
makes one run."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from runq.client import AsyncClient
from runq.worker.log import log

if TYPE_CHECKING:
    from runq.worker.core import Core

# Schedules per runq.tick (its default).
TICK_BATCH = 100


class Upkeep:
    def __init__(self, core: Core) -> None:
        self.core = core

    async def sweep_loop(self) -> None:
        pool = self.core.pool
        assert pool.sweep_interval
        while True:
            await asyncio.sleep(pool.sweep_interval)
            async with self.core.db.connection() as conn:
                for action in await AsyncClient(conn).sweep():
                    log.info("sweep: run %s %s", action.run_id, action.action)

    async def tick_loop(self) -> None:
        pool = self.core.pool
        assert pool.tick_interval
        while True:
            # A full batch may leave more slots due: tick again at once.
            while await self.tick() == TICK_BATCH:
                pass
            await asyncio.sleep(pool.tick_interval)

    async def tick(self) -> int:
        """One runq.tick; how many schedules it handled."""
        async with self.core.db.connection() as conn:
            rows = await AsyncClient(conn).tick(TICK_BATCH)
        for row in rows:
            (log.debug if row.outcome == "created" else log.info)(
                "tick: schedule %s, slot %s: %s (run %s)", row.schedule, row.slot.isoformat(),
                row.outcome, row.run_id)
        return len({row.schedule for row in rows})
