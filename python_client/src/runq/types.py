"""Rows the runq functions return, as frozen dataclasses.

Field names are the SQL result columns, so each class is filled by name
(``psycopg.rows.class_row``). jsonb arrives decoded (dict, list, str, ...);
timestamps are aware datetimes and intervals timedeltas.

Usage and budgets are exact: runq sums them as ``numeric``, and psycopg's
jsonb loader would give a float for 0.1 (0.1 + 0.2 is then not 0.3). The
fields marked :data:`EXACT` (``usage``, ``budget``) are read with every
number as a :class:`decimal.Decimal`, integers too (``Decimal('1200')``,
which equals 1200), so their type is ``dict[str, Decimal]`` and a sum of
them is exact. Every other jsonb field (payload, result, checkpoint, an
event's payload, ...) is read as psycopg reads jsonb.

The columns v0.2 added have defaults (no usage, no budget, no deadline), so
the rows of a v0.1 schema still fill these classes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any

__all__ = [
    "ChildRun",
    "Chunk",
    "ClaimedRun",
    "Event",
    "Limit",
    "OrphanGroup",
    "Pause",
    "QueueStats",
    "RecoveryTotals",
    "Run",
    "Schedule",
    "Submitted",
    "SweepAction",
    "ThroughputRow",
    "TickRow",
    "ToolCall",
    "UsageRow",
]

# The metadata of a jsonb field whose numbers load as Decimal.
EXACT: Mapping[str, bool] = MappingProxyType({"runq_exact": True})


def exact_fields(cls: type[Any]) -> frozenset[str]:
    """The fields of a row class marked EXACT."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("runq_exact"))


@dataclass(frozen=True)
class Submitted:
    """runq.submit: outcome is created, duplicate or input_delivered."""

    run_id: int
    outcome: str


@dataclass(frozen=True)
class ClaimedRun:
    """One row of runq.claim: the run, the lease's epoch and where to resume."""

    run_id: int
    epoch: int
    tenant_id: str
    session_id: str | None
    kind: str
    priority: int
    payload: dict[str, Any]
    attempt: int
    checkpoint: Any
    inputs: list[Any]
    resumed: bool
    lease_expires_at: datetime
    # The run's limits, so that a worker knows them: the deadline (None: no
    # timeout), the budget (None: none) and the usage recorded so far, over
    # every attempt ({} when none).
    deadline: datetime | None = None
    budget: dict[str, Decimal] | None = field(default=None, metadata=EXACT)
    usage: dict[str, Decimal] = field(default_factory=dict, metadata=EXACT)


@dataclass(frozen=True)
class CompletedAndClaimed:
    """runq.complete_and_claim: what the completion answered (True; False
    when fenced; None when no run was given) and the runs claimed after it."""

    completed: bool | None
    runs: list[ClaimedRun]


@dataclass(frozen=True)
class Run:
    """runq.get_run (and runq.dead_letter)."""

    run_id: int
    tenant_id: str
    session_id: str | None
    kind: str
    status: str
    priority: int
    attempts: int
    max_attempts: int
    scheduled_for: datetime | None
    lease_epoch: int
    cancel_requested: bool
    result: Any
    failure: dict[str, Any] | None
    question: Any
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    # The usage totals over every attempt ({} when none), the budget (None:
    # none) and the deadline (None: no timeout).
    usage: dict[str, Decimal] = field(default_factory=dict, metadata=EXACT)
    budget: dict[str, Decimal] | None = field(default=None, metadata=EXACT)
    deadline: datetime | None = None
    # The run that spawned this one (runq.spawn); None for a run submitted.
    # A parent purged before its child still names it here.
    parent_run_id: int | None = None


@dataclass(frozen=True)
class ChildRun:
    """One row of runq.children: a child the run spawned, in spawn order.
    key names it among its parent's children; usage is its own totals,
    which include its descendants'."""

    key: str
    run_id: int
    kind: str
    status: str
    result: Any
    failure: dict[str, Any] | None
    usage: dict[str, Decimal] = field(default_factory=dict, metadata=EXACT)


@dataclass(frozen=True)
class Event:
    """One row of runq.run_events."""

    event_id: int
    epoch: int
    type: str
    payload: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class Chunk:
    """One chunk of a run's output (runq.read_output): seq numbers a run's
    chunks 1, 2, 3, ...; epoch is the claim that wrote it (a new epoch: the
    run started over from its checkpoint)."""

    seq: int
    epoch: int
    chunk: Any
    created_at: datetime


@dataclass(frozen=True)
class ToolCall:
    """One row of runq.tool_calls: status is started, finished, retryable or uncertain."""

    call_id: str
    tool: str
    idempotency: str
    status: str
    epoch: int
    args: dict[str, Any]
    outcome: Any
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class ModelCall:
    """One row of runq.model_calls: applied when its writer held the run
    (a later attempt replays response instead of sending the request)."""

    seq: int
    epoch: int
    applied: bool
    request_hash: str
    response: Any
    usage: dict[str, Decimal] | None = field(metadata=EXACT)
    created_at: datetime


@dataclass(frozen=True)
class SweepAction:
    """One row of runq.sweep: requeued, dead_lettered, orphaned, cancelled or expired."""

    run_id: int
    action: str


@dataclass(frozen=True)
class OrphanGroup:
    """One row of runq.orphan_report."""

    lease_owner: str | None
    stale: bool
    did_work: bool
    runs: int
    oldest_heartbeat_at: datetime | None


@dataclass(frozen=True)
class QueueStats:
    """One row of the runq.queue_stats view (one per priority class)."""

    priority: int
    ready: int
    scheduled: int
    running: int
    waiting_for_user: int
    failed: int
    oldest_ready_age: timedelta | None
    # Runs waiting for their children (runq.wait_children); 0 on a schema
    # before child runs.
    waiting_for_children: int = 0


@dataclass(frozen=True)
class Limit:
    """One row of the runq.limits view: scope is tenant or kind; key None is
    the default row (for every tenant or kind without a row of its own), whose
    running is None; a keyed row's running is its current count of running runs."""

    scope: str
    key: str | None
    max_running: int
    running: int | None


@dataclass(frozen=True)
class Pause:
    """One row of the runq.pauses view: scope is class, kind, tenant or schedule."""

    scope: str
    key: str
    reason: str | None
    paused_at: datetime


@dataclass(frozen=True)
class TickRow:
    """One row of runq.tick: outcome created (run_id the new run),
    skipped_overlap (run_id the schedule's run still live) or missed (slot the
    oldest of the slots skipped, run_id None)."""

    schedule: str
    slot: datetime
    run_id: int | None
    outcome: str


@dataclass(frozen=True)
class Schedule:
    """One row of the runq.schedules view: exactly one of cron and every;
    last_slot the newest slot handled, last_run_id the newest run created."""

    name: str
    tenant_id: str
    kind: str
    cron: str | None
    every: timedelta | None
    timezone: str
    next_slot: datetime
    last_slot: datetime | None
    last_run_id: int | None
    paused: bool


@dataclass(frozen=True)
class UsageRow:
    """One row of runq.usage_report: the usage one tenant's runs of one kind
    recorded in the window (fenced epochs included), ``runs`` the number of
    distinct runs, ``usage`` the exact sums per key."""

    tenant_id: str
    kind: str
    runs: int
    usage: dict[str, Decimal] = field(metadata=EXACT)


@dataclass(frozen=True)
class ThroughputRow:
    """One row of runq.throughput: the runs claimed (``started``) and the runs
    that succeeded, failed or were cancelled (``finished``) in one minute."""

    minute: datetime
    started: int
    finished: int


@dataclass(frozen=True)
class RecoveryTotals:
    """runq.recovery_totals: the run.fenced and run.requeued events stored."""

    fenced: int
    requeued: int
