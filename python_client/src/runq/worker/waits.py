"""Waits on asyncio events that the pool's loops share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence


async def all_set(events: Sequence[asyncio.Event], timeout: float) -> None:
    """Wait until every event is set, for at most timeout seconds."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), timeout)


async def first(timeout: float, *events: asyncio.Event) -> bool:
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
