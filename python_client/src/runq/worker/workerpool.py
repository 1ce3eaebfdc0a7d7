"""WorkerPool: the pool's settings, and its event loop in a thread of its
own that start() starts and stop() and join() end, from any thread."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from runq.worker.context import Handler
from runq.worker.core import Core
from runq.worker.links import connect_kwargs
from runq.worker.log import log
from runq.worker.shutdown import RELEASE_PATIENCE
from runq.worker.state import Slot


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
    # Called on the pool's event loop once runq has acknowledged a run's
    # complete or fail (the pool's, or the handler's own ctx.complete or
    # ctx.fail): (run_id, epoch, "succeeded" or "failed").
    # For audits and metrics; it must not block.
    on_finished: Callable[[int, int, str], None] | None = None

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
        self._core: Core | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the pool's event loop in a thread of its own."""
        self._thread = threading.Thread(target=self._serve, name="runq-pool", daemon=True)
        self._thread.start()
        self._started.wait()

    def _serve(self) -> None:
        async def serve() -> None:
            self._core = Core(self)
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
        return connect_kwargs(application_name, self.connect_kwargs)
