"""What the pool knows of its slots and of each run in flight, and the one
rule for reading why runq took a run away."""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass

from runq.errors import RunStopped
from runq.types import ClaimedRun, Run


@dataclass(frozen=True)
class Slot:
    """``count`` runs at a time claimed from ``classes``."""

    classes: tuple[int, ...]
    count: int = 1


class SlotState:
    def __init__(self, slot: Slot) -> None:
        self.classes = slot.classes
        self.count = slot.count
        self.busy = 0
        self.freed = asyncio.Event()


class Phase(enum.Enum):
    """Where a run in flight is, as far as its writes and heartbeats go."""

    # Claimed, its handler at work: writes go out, heartbeats keep its lease.
    RUNNING = "running"
    # Its completion waits in line for a complete_many: no other write may
    # follow it, but heartbeats go on (the batch may wait on a row lock).
    COMPLETING = "completing"
    # Its last write (complete, fail, ask_user, wait_children, release) is
    # under way or has landed: no write and no heartbeat goes out for it any
    # more.
    FINISHING = "finishing"
    # No longer ours (fenced, cancelled, purged, out of reach for a lease):
    # every write raises RunStopped. Nothing leads out of it.
    STOPPED = "stopped"


class RunState:
    """What the pool knows of one run in flight. Touched on the event loop
    only; other threads only read it."""

    def __init__(self, run: ClaimedRun, slot: SlotState) -> None:
        self.run = run
        self.slot = slot
        self.phase = Phase.RUNNING
        self.alone = False        # its row was locked at its last heartbeat
        self.cancellable = False  # an async handler, whose task cancel() stops
        self.not_beating = asyncio.Event()
        self.not_beating.set()
        self.task: asyncio.Future[None] | None = None
        # Why it stopped, once read; and the failure's message if runq said one.
        self.reason: str | None = None
        self.reason_message: str | None = None
        # How many record_usage calls of each usage (as JSON) landed.
        self.usage_landed: Counter[str] = Counter()
        # How many of its chunks (ctx.emit) landed under its epoch.
        self.chunks_landed = 0

    @property
    def run_id(self) -> int:
        return self.run.run_id

    @property
    def epoch(self) -> int:
        return self.run.epoch

    @property
    def stopped(self) -> bool:
        return self.phase is Phase.STOPPED

    @property
    def done(self) -> bool:
        """No heartbeat goes out for it any more."""
        return self.phase in (Phase.FINISHING, Phase.STOPPED)

    @property
    def closed(self) -> bool:
        """No write goes out for it any more."""
        return self.phase is not Phase.RUNNING

    def stop(self) -> None:
        self.phase = Phase.STOPPED

    def finish(self) -> None:
        # A run stopped meanwhile stays stopped: its RunStopped must say why.
        if self.phase is not Phase.STOPPED:
            self.phase = Phase.FINISHING

    def write_failed(self, final: bool, out_of_reach: bool) -> None:
        """A write that raised did not change the run (bad argument, a value
        jsonb refuses): the handler, or the pool, may write again. Unless the
        database stayed out of reach for a whole lease: then the run is most
        likely no longer ours."""
        if out_of_reach:
            self.phase = Phase.STOPPED
        elif self.phase is Phase.COMPLETING or (final and self.phase is Phase.FINISHING):
            # Any failed write reopens a run whose completion waits in line
            # (that completion may still land: its answer then decides); a
            # failed write that was not a last one leaves a last one under way
            # alone.
            self.phase = Phase.RUNNING

    def refused(self, why: str) -> RunStopped:
        if not self.stopped:
            return RunStopped(f"run {self.run_id} epoch {self.epoch} {why}", "finished")
        if self.reason_message is not None:
            return RunStopped(f"run {self.run_id} epoch {self.epoch} failed: "
                              f"{self.reason_message}", self.reason)
        return RunStopped(f"run {self.run_id} epoch {self.epoch} {why}", self.reason)


def stop_reason(run: Run, epoch: int) -> tuple[str, str | None]:
    """Why runq stopped our epoch of the run, and the failure's message when
    its deadline or budget did: the rules are runq's, this only reads them."""
    if run.lease_epoch != epoch:
        return "fenced", None
    if run.status == "cancelled":
        return "cancelled", None
    failure = run.failure or {}
    code = failure.get("code")
    if run.status == "failed" and code in ("deadline_exceeded", "budget_exhausted"):
        return str(code), str(failure.get("message") or code)
    return "fenced", None

