"""runq: a thin typed Python client for the runq run queue in PostgreSQL.

The SQL functions in the ``runq`` schema are the product; ``Client`` and
``AsyncClient`` call them, one method per function, and return frozen
dataclasses (``runq.types``) or raise the exceptions of ``runq.errors``.
"""

from runq.client import AsyncClient, Client
from runq.errors import (
    IdempotencyConflict,
    InvalidArgument,
    InvalidRunState,
    RunNotFound,
    RunqError,
    RunStopped,
    SessionBusy,
)
from runq.types import (
    ChildRun,
    Chunk,
    ClaimedRun,
    CompletedAndClaimed,
    Event,
    Limit,
    ModelCall,
    OrphanGroup,
    Pause,
    QueueStats,
    Run,
    Schedule,
    Submitted,
    SweepAction,
    TickRow,
    ToolCall,
    UsageRow,
)

__all__ = [
    "AsyncClient",
    "ChildRun",
    "Chunk",
    "ClaimedRun",
    "Client",
    "CompletedAndClaimed",
    "Event",
    "IdempotencyConflict",
    "InvalidArgument",
    "InvalidRunState",
    "Limit",
    "ModelCall",
    "OrphanGroup",
    "Pause",
    "QueueStats",
    "Run",
    "RunNotFound",
    "RunStopped",
    "RunqError",
    "Schedule",
    "SessionBusy",
    "Submitted",
    "SweepAction",
    "TickRow",
    "ToolCall",
    "UsageRow",
]
