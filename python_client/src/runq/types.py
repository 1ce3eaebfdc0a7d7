"""Rows the runq functions return, as frozen dataclasses.

Field names are the SQL result columns, so each class is filled by
``psycopg.rows.class_row``. jsonb arrives decoded (dict, list, str, ...);
timestamps are aware datetimes and intervals timedeltas.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = [
    "ClaimedRun",
    "Event",
    "Limit",
    "OrphanGroup",
    "Pause",
    "QueueStats",
    "Run",
    "Submitted",
    "SweepAction",
    "ToolCall",
]


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


@dataclass(frozen=True)
class Event:
    """One row of runq.run_events."""

    event_id: int
    epoch: int
    type: str
    payload: dict[str, Any]
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
