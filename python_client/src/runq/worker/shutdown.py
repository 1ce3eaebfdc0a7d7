"""The end of a pool: claims on their way land, the handlers get what is
left of the grace, and the runs still in flight are given back with
runq.release, which follows each run's recovery policy."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runq.errors import RunStopped
from runq.worker.log import log
from runq.worker.state import RunState

if TYPE_CHECKING:
    from runq.worker.core import Core

# How long the releases after the grace period may take together (a database
# that is gone cannot take the runs back; their leases expire).
RELEASE_PATIENCE = 3.0


async def wind_down(core: Core, claimers: Sequence[asyncio.Future[None]]) -> None:
    """After stop(): the heartbeats go on meanwhile."""
    grace = core.pool.grace
    grace_ends = time.monotonic() + grace
    await asyncio.wait(claimers, timeout=grace)
    while core.tasks and time.monotonic() < grace_ends:
        await asyncio.wait(list(core.tasks), timeout=grace_ends - time.monotonic())
    await release_leftover(core)


async def release_leftover(core: Core) -> None:
    give_up = time.monotonic() + RELEASE_PATIENCE

    async def release(state: RunState) -> None:
        try:
            await core.writes.release(state, patience=max(0.0, give_up - time.monotonic()))
            log.info("released run %s (epoch %s)", state.run_id, state.epoch)
        except RunStopped:
            pass  # finished, fenced or gone meanwhile: nothing to give back
        except Exception as error:
            log.warning("could not release run %s (epoch %s): %s; its lease will expire",
                        state.run_id, state.epoch, error)

    leftover = [s for s in core.runs.values() if not s.closed]
    if not leftover:
        return
    try:
        await asyncio.wait_for(asyncio.gather(*(release(s) for s in leftover)),
                               RELEASE_PATIENCE)
    except asyncio.TimeoutError:
        log.warning("gave up releasing after %.0f s: the runs left keep their leases"
                    " until they expire", RELEASE_PATIENCE)
