"""Client and AsyncClient: one method per runq SQL function.

Each method runs exactly one ``SELECT * FROM runq.<fn>(name => value, ...)``
in its own short transaction and returns what the function returned. There
is no queue logic here: the SQL functions are the product.

A client is built on one of

* a conninfo string: the client owns an autocommit connection, opened when
  the client is entered (``with Client.connect(url) as client:``) and closed
  when it is left; nothing connects in the constructor;
* a psycopg connection the caller owns: used as it is. On an idle
  autocommit connection every call is its own transaction. Otherwise each
  call runs in ``connection.transaction()``: a transaction committed at once
  when the connection was idle, or a savepoint inside the caller's open
  transaction (so a submit can commit or roll back with the caller's own
  writes, and a runq error leaves that transaction usable). Never keep a
  transaction open while a run executes;
* a psycopg_pool pool the caller owns: each call borrows a connection for
  that call only (give the pool ``kwargs={"autocommit": True}`` to spare
  the BEGIN and COMMIT round trips).

Optional arguments left as None are not sent, so the SQL defaults apply
(a lease of None is the settings' default lease, not NULL). Required
arguments are always sent; None there is SQL NULL, which runq rejects with
InvalidArgument. jsonb arguments take any JSON-serialisable value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import class_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from runq.errors import from_psycopg
from runq.types import (
    ClaimedRun,
    Event,
    OrphanGroup,
    QueueStats,
    Run,
    Submitted,
    SweepAction,
    ToolCall,
)

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")
IDLE = psycopg.pq.TransactionStatus.IDLE

_QUEUE_STATS = sql.SQL("SELECT * FROM runq.queue_stats ORDER BY priority")


def _call(function: str, required: Mapping[str, Any],
          optional: Mapping[str, Any] | None = None) -> tuple[sql.Composed, dict[str, Any]]:
    """``SELECT * FROM runq.<function>(name => %(name)s, ...)`` and its
    parameters: every required argument, and the optional ones not None.
    Names and function come from the calling method's own literals."""
    args = dict(required)
    args.update((k, v) for k, v in (optional or {}).items() if v is not None)
    query = sql.SQL("SELECT * FROM runq.{}({})").format(
        sql.Identifier(function),
        sql.SQL(", ").join(
            sql.SQL("{} => {}").format(sql.Identifier(name), sql.Placeholder(name))
            for name in args
        ),
    )
    return query, args


def _jsonb(value: Any) -> Jsonb | None:
    """A jsonb parameter; None stays None (SQL NULL, or: not sent)."""
    if value is None or isinstance(value, Jsonb):
        return value
    if isinstance(value, Mapping):
        value = dict(value)
    return Jsonb(value)


def _scalar(function: str, typ: type[T], row: tuple[Any, ...] | None) -> T:
    value = row[0] if row else None
    if not isinstance(value, typ):
        raise TypeError(f"runq.{function} returned {value!r}, expected {typ.__name__}")
    return value


@contextmanager
def _runq_errors() -> Iterator[None]:
    """Raise runq's exceptions for runq's SQLSTATEs; anything else unchanged."""
    try:
        yield
    except psycopg.Error as error:
        mapped = from_psycopg(error)
        if mapped is None:
            raise
        raise mapped from error


_NOT_OPEN = ("{} on a conninfo string is not open: use `with {}.connect(conninfo) as client:`"
             " (or `async with` for AsyncClient)")


class Client:
    """Synchronous runq client; see the module's documentation."""

    def __init__(
        self,
        source: str | psycopg.Connection[Any] | ConnectionPool[Any],
        **connect_kwargs: Any,
    ) -> None:
        self._source = source
        self._connect_kwargs = connect_kwargs
        self._owned: psycopg.Connection[Any] | None = None

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Client:
        """A client owning one autocommit connection to ``conninfo``, opened
        on ``with`` (kwargs go to ``psycopg.connect``)."""
        return cls(conninfo, **kwargs)

    def __enter__(self) -> Client:
        if isinstance(self._source, str) and self._owned is None:
            self._owned = psycopg.connect(self._source, **{**self._connect_kwargs,
                                                           "autocommit": True})
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection the client owns (never a caller's)."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        source = self._source
        if isinstance(source, ConnectionPool):
            with source.connection() as conn:
                yield conn
        elif isinstance(source, str):
            if self._owned is None:
                raise RuntimeError(_NOT_OPEN.format("Client", "Client"))
            yield self._owned
        elif source.autocommit and source.info.transaction_status == IDLE:
            yield source
        else:  # a transaction of its own, or a savepoint in the caller's
            with source.transaction():
                yield source

    def _rows(self, row: type[T], query: sql.SQL | sql.Composed,
              args: Mapping[str, Any]) -> list[T]:
        with _runq_errors(), self._connection() as conn, \
                conn.cursor(row_factory=class_row(row)) as cur:
            cur.execute(query, args)
            return cur.fetchall()

    def _value(self, typ: type[T], function: str, required: Mapping[str, Any],
               optional: Mapping[str, Any] | None = None) -> T:
        query, args = _call(function, required, optional)
        with _runq_errors(), self._connection() as conn, \
                conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(query, args)
            return _scalar(function, typ, cur.fetchone())

    # -- submitters ---------------------------------------------------------

    def submit(
        self,
        tenant_id: str,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        priority: int | None = None,
        idempotency_key: str | None = None,
        principal_id: str | None = None,
        scheduled_for: datetime | None = None,
        max_attempts: int | None = None,
        recovery_policy: str | None = None,
        queue_ttl: timedelta | None = None,
    ) -> Submitted:
        """runq.submit: outcome created, duplicate or input_delivered.
        Raises IdempotencyConflict, SessionBusy, InvalidArgument."""
        query, args = _call("submit", {"tenant_id": tenant_id, "kind": kind}, {
            "payload": _jsonb(payload), "session_id": session_id, "priority": priority,
            "idempotency_key": idempotency_key, "principal_id": principal_id,
            "scheduled_for": scheduled_for, "max_attempts": max_attempts,
            "recovery_policy": recovery_policy, "queue_ttl": queue_ttl})
        return self._rows(Submitted, query, args)[0]

    def deliver_input(self, run_id: int, input: Any) -> bool:
        """runq.deliver_input: answer a waiting_for_user run and requeue it."""
        return self._value(bool, "deliver_input", {"run_id": run_id, "input": _jsonb(input)})

    def cancel(self, run_id: int, reason: str | None = None) -> str:
        """runq.cancel: cancelled, cancel_requested or already_terminal."""
        return self._value(str, "cancel", {"run_id": run_id}, {"reason": reason})

    def get_run(self, run_id: int) -> Run:
        """runq.get_run. Raises RunNotFound."""
        return self._rows(Run, *_call("get_run", {"run_id": run_id}))[0]

    def run_events(self, run_id: int) -> list[Event]:
        """runq.run_events: the run's events in order. Raises RunNotFound."""
        return self._rows(Event, *_call("run_events", {"run_id": run_id}))

    # -- workers ------------------------------------------------------------

    def claim(
        self,
        classes: Sequence[int],
        *,
        worker_id: str | None = None,
        lease: timedelta | None = None,
        max_runs: int | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[ClaimedRun]:
        """runq.claim: up to max_runs ready runs of these classes (and of
        these kinds, when given); [] when nothing is ready."""
        query, args = _call("claim", {"classes": list(classes)},
                            {"worker_id": worker_id, "lease": lease, "max_runs": max_runs,
                             "kinds": None if kinds is None else list(kinds)})
        return self._rows(ClaimedRun, query, args)

    def heartbeat(self, run_id: int, epoch: int) -> bool:
        """runq.heartbeat: extend the lease; False means stop."""
        return self._value(bool, "heartbeat", {"run_id": run_id, "epoch": epoch})

    def complete(self, run_id: int, epoch: int, result: Any = None) -> bool:
        """runq.complete: the run succeeded; False when fenced."""
        return self._value(bool, "complete", {"run_id": run_id, "epoch": epoch},
                           {"result": _jsonb(result)})

    def fail(self, run_id: int, epoch: int, failure: Mapping[str, Any]) -> bool:
        """runq.fail: the run failed for good (failure holds at least a code)."""
        return self._value(bool, "fail",
                           {"run_id": run_id, "epoch": epoch, "failure": _jsonb(failure)})

    def release(self, run_id: int, epoch: int) -> bool:
        """runq.release: give the lease back now (graceful shutdown)."""
        return self._value(bool, "release", {"run_id": run_id, "epoch": epoch})

    def ask_user(self, run_id: int, epoch: int, question: Any) -> bool:
        """runq.ask_user: the run waits for the user's input."""
        return self._value(bool, "ask_user",
                           {"run_id": run_id, "epoch": epoch, "question": _jsonb(question)})

    def checkpoint(self, run_id: int, epoch: int, state: Any) -> bool:
        """runq.checkpoint: the loop state a later claim resumes from."""
        return self._value(bool, "checkpoint",
                           {"run_id": run_id, "epoch": epoch, "state": _jsonb(state)})

    def begin_turn(self, run_id: int, epoch: int) -> bool:
        """runq.begin_turn: call before a chargeable model call."""
        return self._value(bool, "begin_turn", {"run_id": run_id, "epoch": epoch})

    def begin_tool(self, run_id: int, epoch: int, call_id: str, tool: str, idempotency: str,
                   args: Mapping[str, Any] | None = None) -> bool:
        """runq.begin_tool: call before the tool executes; idempotency is
        read_only, idempotent or non_idempotent."""
        return self._value(bool, "begin_tool", {
            "run_id": run_id, "epoch": epoch, "call_id": call_id, "tool": tool,
            "idempotency": idempotency}, {"args": _jsonb(args)})

    def end_tool(self, run_id: int, epoch: int, call_id: str, outcome: Any) -> bool:
        """runq.end_tool: the tool call's outcome."""
        return self._value(bool, "end_tool", {"run_id": run_id, "epoch": epoch,
                                              "call_id": call_id, "outcome": _jsonb(outcome)})

    def tool_calls(self, run_id: int) -> list[ToolCall]:
        """runq.tool_calls: the run's tool calls."""
        return self._rows(ToolCall, *_call("tool_calls", {"run_id": run_id}))

    # -- operators ----------------------------------------------------------

    def sweep(self, max_runs: int | None = None) -> list[SweepAction]:
        """runq.sweep: what it did to each run it touched."""
        return self._rows(SweepAction, *_call("sweep", {}, {"max_runs": max_runs}))

    def redrive(self, run_id: int, reason: str | None = None) -> bool:
        """runq.redrive: a failed run back to queued. Raises InvalidRunState,
        SessionBusy, RunNotFound."""
        return self._value(bool, "redrive", {"run_id": run_id}, {"reason": reason})

    def orphan_report(self, stale_after: timedelta | None = None) -> list[OrphanGroup]:
        """runq.orphan_report: running runs by owner, staleness and work done."""
        return self._rows(OrphanGroup, *_call("orphan_report", {},
                                              {"stale_after": stale_after}))

    def queue_stats(self) -> list[QueueStats]:
        """The runq.queue_stats view, by priority."""
        return self._rows(QueueStats, _QUEUE_STATS, {})

    def dead_letter(self, max_runs: int | None = None) -> list[Run]:
        """runq.dead_letter: failed runs, most recently finished first."""
        return self._rows(Run, *_call("dead_letter", {}, {"max_runs": max_runs}))

    def purge(self, older_than: timedelta, max_runs: int | None = None,
              include_failed: bool | None = None) -> int:
        """runq.purge: delete one batch of runs finished before older_than ago
        (failed ones only with include_failed), with everything they own.
        Returns how many it deleted: call again until that is fewer than max_runs."""
        return self._value(int, "purge", {"older_than": older_than},
                           {"max_runs": max_runs, "include_failed": include_failed})


class AsyncClient:
    """asyncio runq client: the same methods as Client, awaited."""

    def __init__(
        self,
        source: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        **connect_kwargs: Any,
    ) -> None:
        self._source = source
        self._connect_kwargs = connect_kwargs
        self._owned: psycopg.AsyncConnection[Any] | None = None

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> AsyncClient:
        """A client owning one autocommit connection to ``conninfo``, opened
        on ``async with`` (kwargs go to ``psycopg.AsyncConnection.connect``)."""
        return cls(conninfo, **kwargs)

    async def __aenter__(self) -> AsyncClient:
        if isinstance(self._source, str) and self._owned is None:
            self._owned = await psycopg.AsyncConnection.connect(
                self._source, **{**self._connect_kwargs, "autocommit": True})
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection the client owns (never a caller's)."""
        if self._owned is not None:
            await self._owned.close()
            self._owned = None

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        source = self._source
        if isinstance(source, AsyncConnectionPool):
            async with source.connection() as conn:
                yield conn
        elif isinstance(source, str):
            if self._owned is None:
                raise RuntimeError(_NOT_OPEN.format("AsyncClient", "AsyncClient"))
            yield self._owned
        elif source.autocommit and source.info.transaction_status == IDLE:
            yield source
        else:  # a transaction of its own, or a savepoint in the caller's
            async with source.transaction():
                yield source

    async def _rows(self, row: type[T], query: sql.SQL | sql.Composed,
                    args: Mapping[str, Any]) -> list[T]:
        with _runq_errors():
            async with self._connection() as conn, \
                    conn.cursor(row_factory=class_row(row)) as cur:
                await cur.execute(query, args)
                return await cur.fetchall()

    async def _value(self, typ: type[T], function: str, required: Mapping[str, Any],
                     optional: Mapping[str, Any] | None = None) -> T:
        query, args = _call(function, required, optional)
        with _runq_errors():
            async with self._connection() as conn, \
                    conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(query, args)
                return _scalar(function, typ, await cur.fetchone())

    # -- submitters ---------------------------------------------------------

    async def submit(
        self,
        tenant_id: str,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        priority: int | None = None,
        idempotency_key: str | None = None,
        principal_id: str | None = None,
        scheduled_for: datetime | None = None,
        max_attempts: int | None = None,
        recovery_policy: str | None = None,
        queue_ttl: timedelta | None = None,
    ) -> Submitted:
        """runq.submit: outcome created, duplicate or input_delivered.
        Raises IdempotencyConflict, SessionBusy, InvalidArgument."""
        query, args = _call("submit", {"tenant_id": tenant_id, "kind": kind}, {
            "payload": _jsonb(payload), "session_id": session_id, "priority": priority,
            "idempotency_key": idempotency_key, "principal_id": principal_id,
            "scheduled_for": scheduled_for, "max_attempts": max_attempts,
            "recovery_policy": recovery_policy, "queue_ttl": queue_ttl})
        return (await self._rows(Submitted, query, args))[0]

    async def deliver_input(self, run_id: int, input: Any) -> bool:
        """runq.deliver_input: answer a waiting_for_user run and requeue it."""
        return await self._value(bool, "deliver_input",
                                 {"run_id": run_id, "input": _jsonb(input)})

    async def cancel(self, run_id: int, reason: str | None = None) -> str:
        """runq.cancel: cancelled, cancel_requested or already_terminal."""
        return await self._value(str, "cancel", {"run_id": run_id}, {"reason": reason})

    async def get_run(self, run_id: int) -> Run:
        """runq.get_run. Raises RunNotFound."""
        return (await self._rows(Run, *_call("get_run", {"run_id": run_id})))[0]

    async def run_events(self, run_id: int) -> list[Event]:
        """runq.run_events: the run's events in order. Raises RunNotFound."""
        return await self._rows(Event, *_call("run_events", {"run_id": run_id}))

    # -- workers ------------------------------------------------------------

    async def claim(
        self,
        classes: Sequence[int],
        *,
        worker_id: str | None = None,
        lease: timedelta | None = None,
        max_runs: int | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[ClaimedRun]:
        """runq.claim: up to max_runs ready runs of these classes (and of
        these kinds, when given); [] when nothing is ready."""
        query, args = _call("claim", {"classes": list(classes)},
                            {"worker_id": worker_id, "lease": lease, "max_runs": max_runs,
                             "kinds": None if kinds is None else list(kinds)})
        return await self._rows(ClaimedRun, query, args)

    async def heartbeat(self, run_id: int, epoch: int) -> bool:
        """runq.heartbeat: extend the lease; False means stop."""
        return await self._value(bool, "heartbeat", {"run_id": run_id, "epoch": epoch})

    async def complete(self, run_id: int, epoch: int, result: Any = None) -> bool:
        """runq.complete: the run succeeded; False when fenced."""
        return await self._value(bool, "complete", {"run_id": run_id, "epoch": epoch},
                                 {"result": _jsonb(result)})

    async def fail(self, run_id: int, epoch: int, failure: Mapping[str, Any]) -> bool:
        """runq.fail: the run failed for good (failure holds at least a code)."""
        return await self._value(bool, "fail",
                                 {"run_id": run_id, "epoch": epoch, "failure": _jsonb(failure)})

    async def release(self, run_id: int, epoch: int) -> bool:
        """runq.release: give the lease back now (graceful shutdown)."""
        return await self._value(bool, "release", {"run_id": run_id, "epoch": epoch})

    async def ask_user(self, run_id: int, epoch: int, question: Any) -> bool:
        """runq.ask_user: the run waits for the user's input."""
        return await self._value(bool, "ask_user", {"run_id": run_id, "epoch": epoch,
                                                    "question": _jsonb(question)})

    async def checkpoint(self, run_id: int, epoch: int, state: Any) -> bool:
        """runq.checkpoint: the loop state a later claim resumes from."""
        return await self._value(bool, "checkpoint",
                                 {"run_id": run_id, "epoch": epoch, "state": _jsonb(state)})

    async def begin_turn(self, run_id: int, epoch: int) -> bool:
        """runq.begin_turn: call before a chargeable model call."""
        return await self._value(bool, "begin_turn", {"run_id": run_id, "epoch": epoch})

    async def begin_tool(self, run_id: int, epoch: int, call_id: str, tool: str,
                         idempotency: str, args: Mapping[str, Any] | None = None) -> bool:
        """runq.begin_tool: call before the tool executes; idempotency is
        read_only, idempotent or non_idempotent."""
        return await self._value(bool, "begin_tool", {
            "run_id": run_id, "epoch": epoch, "call_id": call_id, "tool": tool,
            "idempotency": idempotency}, {"args": _jsonb(args)})

    async def end_tool(self, run_id: int, epoch: int, call_id: str, outcome: Any) -> bool:
        """runq.end_tool: the tool call's outcome."""
        return await self._value(bool, "end_tool", {
            "run_id": run_id, "epoch": epoch, "call_id": call_id, "outcome": _jsonb(outcome)})

    async def tool_calls(self, run_id: int) -> list[ToolCall]:
        """runq.tool_calls: the run's tool calls."""
        return await self._rows(ToolCall, *_call("tool_calls", {"run_id": run_id}))

    # -- operators ----------------------------------------------------------

    async def sweep(self, max_runs: int | None = None) -> list[SweepAction]:
        """runq.sweep: what it did to each run it touched."""
        return await self._rows(SweepAction, *_call("sweep", {}, {"max_runs": max_runs}))

    async def redrive(self, run_id: int, reason: str | None = None) -> bool:
        """runq.redrive: a failed run back to queued. Raises InvalidRunState,
        SessionBusy, RunNotFound."""
        return await self._value(bool, "redrive", {"run_id": run_id}, {"reason": reason})

    async def orphan_report(self, stale_after: timedelta | None = None) -> list[OrphanGroup]:
        """runq.orphan_report: running runs by owner, staleness and work done."""
        return await self._rows(OrphanGroup, *_call("orphan_report", {},
                                                    {"stale_after": stale_after}))

    async def queue_stats(self) -> list[QueueStats]:
        """The runq.queue_stats view, by priority."""
        return await self._rows(QueueStats, _QUEUE_STATS, {})

    async def dead_letter(self, max_runs: int | None = None) -> list[Run]:
        """runq.dead_letter: failed runs, most recently finished first."""
        return await self._rows(Run, *_call("dead_letter", {}, {"max_runs": max_runs}))

    async def purge(self, older_than: timedelta, max_runs: int | None = None,
                    include_failed: bool | None = None) -> int:
        """runq.purge: delete one batch of runs finished before older_than ago
        (failed ones only with include_failed), with everything they own.
        Returns how many it deleted: call again until that is fewer than max_runs."""
        return await self._value(int, "purge", {"older_than": older_than},
                                 {"max_runs": max_runs, "include_failed": include_failed})
