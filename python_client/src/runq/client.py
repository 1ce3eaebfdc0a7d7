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
(a lease of None is the settings' default lease, not NULL), and a call that
leaves the v0.2 arguments out (submit's budget and timeout) is the call a
v0.1 schema knows. Required arguments are always sent; None there is SQL
NULL, which runq rejects with InvalidArgument (set_budget's budget is the
exception: None there removes the budget). jsonb arguments take any
JSON-serialisable value, and Decimal too, written as the exact number it is.

Numbers in ``usage`` and ``budget`` columns come back as Decimal (see
runq.types): the SQL sums them exactly, and so may the caller.

Each call is written once, in _Calls, as the query it sends (its SQL, its
parameters and how its rows are read); a Client runs that query and an
AsyncClient awaits it, so the two cannot drift apart.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from types import MethodType, TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.conninfo import make_conninfo
from psycopg.pq import Format
from psycopg.rows import BaseRowFactory, RowMaker, class_row, kwargs_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from runq import types, waiting
from runq.errors import from_psycopg

if TYPE_CHECKING:  # what a row factory is given; psycopg exports it under no public name
    from psycopg._cursor_base import BaseCursor

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
Conn = TypeVar("Conn", bound=psycopg.Connection[Any] | psycopg.AsyncConnection[Any])
Pool = TypeVar("Pool")
IDLE = psycopg.pq.TransactionStatus.IDLE
JSONB_OID = psycopg.postgres.types["jsonb"].oid


@dataclass(frozen=True)
class _Query(Generic[R]):
    """What one call sends and how its rows become the call's result.
    ``raw_jsonb``: the cursor hands jsonb over undecoded, for the row
    factory to decode (see _exact_row)."""

    statement: sql.SQL | sql.Composed
    params: Mapping[str, Any]
    row_factory: BaseRowFactory[Any]
    decode: Callable[[list[Any]], R]
    raw_jsonb: bool = False


# -- jsonb: exact numbers both ways ------------------------------------------------


class _HasDecimal(Exception):
    pass


def _refuse(value: Any) -> Any:
    if isinstance(value, Decimal):
        raise _HasDecimal
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _number(value: Decimal) -> str:
    """A Decimal as a JSON number, digit for digit (no exponent)."""
    return format(value, "f")


def _key(key: Any) -> str:
    """A dict key as json.dumps turns it into a string."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def json_text(value: Any, *, indent: int | None = None, sort_keys: bool = False,
              separators: tuple[str, str] | None = None,
              default: Callable[[Any], Any] | None = None) -> str:
    """json.dumps, except that a Decimal is written as the number it is
    (json.dumps refuses Decimal; a float would round it). The arguments are
    json.dumps's."""
    def fallback(v: Any) -> Any:
        if isinstance(v, Decimal) or default is None:
            return _refuse(v)
        return default(v)

    try:
        return json.dumps(value, indent=indent, sort_keys=sort_keys, separators=separators,
                          default=fallback)
    except _HasDecimal:
        pass
    item, colon = separators or ((", " if indent is None else ","), ": ")
    seen: set[int] = set()

    def encode(v: Any, level: int) -> str:
        if isinstance(v, Decimal):
            return _number(v)
        if isinstance(v, dict | list | tuple):
            if id(v) in seen:
                raise ValueError("Circular reference detected")
            seen.add(id(v))
            if isinstance(v, dict):
                pairs = [(_key(k), x) for k, x in v.items()]
                parts = [f"{json.dumps(k)}{colon}{encode(x, level + 1)}"
                         for k, x in (sorted(pairs, key=lambda p: p[0]) if sort_keys else pairs)]
                opening, closing = "{", "}"
            else:
                parts = [encode(x, level + 1) for x in v]
                opening, closing = "[", "]"
            seen.discard(id(v))
            if not parts:
                return opening + closing
            if indent is None:
                return opening + item.join(parts) + closing
            inner, outer = "\n" + " " * (indent * (level + 1)), "\n" + " " * (indent * level)
            return opening + inner + (item + inner).join(parts) + outer + closing
        if default is not None and not isinstance(v, str | int | float | bool | type(None)):
            return encode(default(v), level)
        return json.dumps(v)

    return encode(value, 0)


_exact_loads = partial(json.loads, parse_float=Decimal, parse_int=Decimal)


class _RawJsonb(Loader):
    """jsonb as its text, for _exact_row to decode."""

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


class _RawJsonbBinary(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)[1:]  # the version byte, then the text


def _exact_row(make_row: BaseRowFactory[T], exact: frozenset[str]) -> BaseRowFactory[T]:
    """make_row (a class_row), on a cursor that loads jsonb raw (_RawJsonb):
    the columns named in exact are decoded with every number a Decimal, the
    other jsonb columns as the connection would decode them."""

    def factory(cursor: BaseCursor[Any, Any]) -> RowMaker[T]:
        make = make_row(cursor)
        conn = cursor.connection
        plain = conn.adapters.get_loader(JSONB_OID, Format.TEXT)
        decoders: list[tuple[int, Callable[[bytes], Any]]] = []
        for i, column in enumerate(cursor.description or ()):
            if column.type_code != JSONB_OID:
                continue
            if column.name in exact:
                decoders.append((i, _exact_loads))
            elif plain is not None:
                decoders.append((i, plain(JSONB_OID, conn).load))
            else:  # no jsonb loader on the connection: psycopg's default
                decoders.append((i, json.loads))

        def make_exact(values: Sequence[Any]) -> T:
            decoded = list(values)
            for i, load in decoders:
                if decoded[i] is not None:
                    decoded[i] = load(decoded[i])
            return make(decoded)

        return make_exact

    return factory


def _reader(row: type[T]) -> tuple[BaseRowFactory[T], bool]:
    """The row factory for a row class, and whether it needs jsonb raw."""
    exact = types.exact_fields(row)
    return (_exact_row(class_row(row), exact), True) if exact else (class_row(row), False)


def _completed_and_claimed(completed: bool | None, **claimed: Any
                           ) -> tuple[bool | None, types.ClaimedRun | None]:
    """A row of runq.complete_and_claim: completed, and the claimed run
    (None in the row that says nothing was claimed)."""
    return completed, types.ClaimedRun(**claimed) if claimed["run_id"] is not None else None


def _select(function: str, required: Mapping[str, Any],
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


def _rows(row: type[T], function: str, required: Mapping[str, Any],
          optional: Mapping[str, Any] | None = None) -> _Query[list[T]]:
    """Every row runq.<function> returns, as a ``row``."""
    factory, raw = _reader(row)
    return _Query(*_select(function, required, optional), factory, list, raw)


def _row(row: type[T], function: str, required: Mapping[str, Any],
         optional: Mapping[str, Any] | None = None) -> _Query[T]:
    """The one row runq.<function> returns, as a ``row``."""
    factory, raw = _reader(row)
    return _Query(*_select(function, required, optional), factory, lambda rows: rows[0], raw)


def _value(typ: type[T], function: str, required: Mapping[str, Any],
           optional: Mapping[str, Any] | None = None) -> _Query[T]:
    """The one value runq.<function> returns, which must be a ``typ``."""

    def decode(rows: list[tuple[Any, ...]]) -> T:
        value = rows[0][0] if rows else None
        if not isinstance(value, typ):
            raise TypeError(f"runq.{function} returned {value!r}, expected {typ.__name__}")
        return value

    return _Query(*_select(function, required, optional), tuple_row, decode)


def _optional(typ: type[T], function: str, required: Mapping[str, Any],
              optional: Mapping[str, Any] | None = None) -> _Query[T | None]:
    """The one value runq.<function> returns: a ``typ``, or None for SQL NULL."""

    def decode(rows: list[tuple[Any, ...]]) -> T | None:
        value = rows[0][0] if rows else None
        if value is not None and not isinstance(value, typ):
            raise TypeError(f"runq.{function} returned {value!r}, expected {typ.__name__}")
        return value

    return _Query(*_select(function, required, optional), tuple_row, decode)


def _void(function: str, required: Mapping[str, Any],
          optional: Mapping[str, Any] | None = None) -> _Query[None]:
    """A call of runq.<function>, which returns void: the call's result is None."""
    return _Query(*_select(function, required, optional), tuple_row, lambda rows: None)


def _jsonb(value: Any) -> Jsonb | None:
    """A jsonb parameter; None stays None (SQL NULL, or: not sent). A
    Decimal in it is sent as the number it is."""
    if value is None or isinstance(value, Jsonb):
        return value
    if isinstance(value, Mapping):
        value = dict(value)
    return Jsonb(value, dumps=json_text)


def _raw_jsonb(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> None:
    cursor.adapters.register_loader(JSONB_OID, _RawJsonb)
    cursor.adapters.register_loader(JSONB_OID, _RawJsonbBinary)


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


class _Call(Generic[P, R]):
    """A runq call written once, as the method that builds its query. On a
    Client the method runs that query; on an AsyncClient (whose _execute is
    a coroutine function) it is a coroutine function that awaits it. Either
    way it has the builder's name, docstring and signature, and returns what
    the query decodes to."""

    def __init__(self, build: Callable[Concatenate[Any, P], _Query[R]]) -> None:
        self._build = build
        self._methods: dict[type[Any], Callable[..., Any]] = {}

    @overload
    def __get__(self, client: None, owner: type[Client]) -> Callable[Concatenate[Client, P], R]:
        ...

    @overload
    def __get__(self, client: None, owner: type[AsyncClient]
                ) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]:
        ...

    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[P, R]:
        ...

    @overload
    def __get__(self, client: AsyncClient, owner: type[Any]
                ) -> Callable[P, Coroutine[Any, Any, R]]:
        ...

    def __get__(self, client: object, owner: type[Any]) -> Any:
        method = self._methods.get(owner) or self._method(owner)
        return method if client is None else MethodType(method, client)

    def _method(self, owner: type[Any]) -> Callable[..., Any]:
        build = self._build

        def run(client: Any, /, *args: Any, **kwargs: Any) -> Any:
            return client._execute(build(client, *args, **kwargs))

        async def run_awaited(client: Any, /, *args: Any, **kwargs: Any) -> Any:
            return await client._execute(build(client, *args, **kwargs))

        awaited = inspect.iscoroutinefunction(owner._execute)
        method: Callable[..., Any] = run_awaited if awaited else run
        # "_Query[X]" (a string: annotations are not evaluated) -> "X"
        returns = build.__annotations__["return"].removeprefix("_Query[")[:-1]
        method.__name__ = build.__name__
        method.__qualname__ = f"{owner.__qualname__}.{build.__name__}"
        method.__doc__ = build.__doc__
        method.__annotations__ = {**build.__annotations__, "return": returns}
        method.__signature__ = (  # type: ignore[attr-defined]
            inspect.signature(build).replace(return_annotation=returns))
        self._methods[owner] = method
        return method


_NOT_OPEN = ("{0} on a conninfo string is not open: use `with {0}.connect(conninfo) as client:`"
             " (or `async with` for AsyncClient)")


class _Calls(Generic[Conn, Pool]):
    """What Client and AsyncClient share: the source a client is built on,
    and every runq call, each written once as the query it sends."""

    def __init__(self, source: str | Conn | Pool, **connect_kwargs: Any) -> None:
        self._source = source
        self._connect_kwargs = connect_kwargs
        self._owned: Conn | None = None

    def _target(self) -> Conn | Pool:
        """What a call runs on: the caller's connection or pool, or the
        connection the client owns once it is entered."""
        if not isinstance(self._source, str):
            return self._source
        if self._owned is None:
            raise RuntimeError(_NOT_OPEN.format(type(self).__name__))
        return self._owned

    def _as_is(self, conn: Conn) -> bool:
        """Whether a call runs on conn as it is, each statement its own
        transaction: the client's own connection, or the caller's idle in
        autocommit. Otherwise it runs in conn.transaction()."""
        return conn is self._owned or (
            conn.autocommit and conn.info.transaction_status == IDLE)

    def _dispatcher(self) -> waiting.Dispatcher:
        """The process's dispatcher of waits for this client's database: it
        connects on its own, so it needs what the client connects with."""
        source = self._source
        if isinstance(source, str):
            return waiting.dispatcher(source, self._connect_kwargs)
        if isinstance(source, psycopg.Connection | psycopg.AsyncConnection):
            info = source.info
            return waiting.dispatcher(make_conninfo(info.dsn, password=info.password), {})
        if isinstance(source, ConnectionPool | AsyncConnectionPool) \
                and isinstance(source.conninfo, str) and isinstance(source.kwargs, dict):
            return waiting.dispatcher(source.conninfo, source.kwargs)
        raise TypeError("waiting needs a conninfo string, a connection, or a pool whose"
                        " conninfo and kwargs are not callables")

    # -- submitters ---------------------------------------------------------

    @_Call
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
        budget: Mapping[str, int | float | Decimal] | None = None,
        timeout: timedelta | None = None,
    ) -> _Query[types.Submitted]:
        """runq.submit: outcome created, duplicate or input_delivered.
        budget: limits of the run's usage totals over every attempt
        ({"cost_usd": Decimal("2.00")}), checked by begin_turn; timeout: the
        run must be terminal that long after its submit (its deadline).
        Raises IdempotencyConflict, SessionBusy, InvalidArgument."""
        return _row(types.Submitted, "submit", {"tenant_id": tenant_id, "kind": kind}, {
            "payload": _jsonb(payload), "session_id": session_id, "priority": priority,
            "idempotency_key": idempotency_key, "principal_id": principal_id,
            "scheduled_for": scheduled_for, "max_attempts": max_attempts,
            "recovery_policy": recovery_policy, "queue_ttl": queue_ttl,
            "budget": _jsonb(budget), "timeout": timeout})

    @_Call
    def deliver_input(self, run_id: int, input: Any) -> _Query[bool]:
        """runq.deliver_input: answer a waiting_for_user run and requeue it."""
        return _value(bool, "deliver_input", {"run_id": run_id, "input": _jsonb(input)})

    @_Call
    def cancel(self, run_id: int, reason: str | None = None) -> _Query[str]:
        """runq.cancel: cancelled, cancel_requested or already_terminal."""
        return _value(str, "cancel", {"run_id": run_id}, {"reason": reason})

    @_Call
    def get_run(self, run_id: int) -> _Query[types.Run]:
        """runq.get_run. Raises RunNotFound."""
        return _row(types.Run, "get_run", {"run_id": run_id})

    @_Call
    def run_events(self, run_id: int) -> _Query[list[types.Event]]:
        """runq.run_events: the run's events in order. Raises RunNotFound."""
        return _rows(types.Event, "run_events", {"run_id": run_id})

    @_Call
    def children(self, run_id: int) -> _Query[list[types.ChildRun]]:
        """runq.children: the children the run spawned, in spawn order, each
        with its status, result, failure and usage (its own totals, its
        descendants' included). Raises RunNotFound."""
        return _rows(types.ChildRun, "children", {"run_id": run_id})

    # -- waiting for a run and its output ----------------------------------------

    @_Call
    def watch(self, run_id: int) -> _Query[types.Run]:
        """runq.watch: this session is notified (NOTIFY runq_run) of the run's
        ends and output until unwatch; the run as it is now. Client.wait and
        Client.stream do the listening; this is the bare call."""
        return _row(types.Run, "watch", {"run_id": run_id})

    @_Call
    def unwatch(self, run_id: int) -> _Query[bool]:
        """runq.unwatch: end this session's watch; False when there was none."""
        return _value(bool, "unwatch", {"run_id": run_id})

    @_Call
    def read_output(self, run_id: int, after_seq: int = 0,
                    max_chunks: int | None = None) -> _Query[list[types.Chunk]]:
        """runq.read_output: the run's chunks after after_seq, in order."""
        return _rows(types.Chunk, "read_output", {"run_id": run_id, "after_seq": after_seq},
                     {"max_chunks": max_chunks})

    # -- workers ---------------------------------------------------------------

    @_Call
    def claim(
        self,
        classes: Sequence[int],
        *,
        worker_id: str | None = None,
        lease: timedelta | None = None,
        max_runs: int | None = None,
        kinds: Sequence[str] | None = None,
    ) -> _Query[list[types.ClaimedRun]]:
        """runq.claim: up to max_runs ready runs of these classes (and of
        these kinds, when given); [] when nothing is ready."""
        return _rows(types.ClaimedRun, "claim", {"classes": list(classes)},
                     {"worker_id": worker_id, "lease": lease, "max_runs": max_runs,
                      "kinds": None if kinds is None else list(kinds)})

    @_Call
    def emit(self, run_id: int, epoch: int, chunks: Sequence[Any]) -> _Query[bool]:
        """runq.emit: append chunks (JSON values) to the run's output; False
        when fenced (nothing stored)."""
        return _value(bool, "emit", {"run_id": run_id, "epoch": epoch,
                                     "chunks": [_jsonb(c) for c in chunks]})

    @_Call
    def heartbeat(self, run_id: int, epoch: int) -> _Query[bool]:
        """runq.heartbeat: extend the lease; False means stop."""
        return _value(bool, "heartbeat", {"run_id": run_id, "epoch": epoch})

    @_Call
    def heartbeat_many(self, runs: Sequence[tuple[int, int]]) -> _Query[dict[int, bool]]:
        """runq.heartbeat_many: heartbeat for each (run_id, epoch) in one
        statement; {run_id: alive}, False meaning stop that run."""
        return _Query(*_select("heartbeat_many", {"run_ids": [r for r, _ in runs],
                                                  "epochs": [e for _, e in runs]}),
                      tuple_row, dict)

    @_Call
    def complete_many(self, runs: Sequence[tuple[int, int, Any]]) -> _Query[dict[int, bool]]:
        """runq.complete_many: complete for each (run_id, epoch, result) in
        one statement; {run_id: completed}, False when that run is fenced."""
        return _Query(*_select("complete_many", {"run_ids": [r for r, _, _ in runs],
                                                 "epochs": [e for _, e, _ in runs],
                                                 "results": [_jsonb(x) for _, _, x in runs]}),
                      tuple_row, dict)

    @_Call
    def complete_and_claim(
        self,
        run_id: int | None,
        epoch: int | None,
        result: Any,
        classes: Sequence[int],
        *,
        worker_id: str | None = None,
        lease: timedelta | None = None,
        max_runs: int | None = None,
        kinds: Sequence[str] | None = None,
        claim_if_fenced: bool | None = None,
    ) -> _Query[types.CompletedAndClaimed]:
        """runq.complete_and_claim: complete the run (None, None: none), then
        claim as claim does, in one call and one transaction. A fenced
        completion (completed False) claims nothing unless claim_if_fenced."""

        def decode(rows: list[tuple[bool | None, types.ClaimedRun | None]]
                   ) -> types.CompletedAndClaimed:
            return types.CompletedAndClaimed(rows[0][0], [run for _, run in rows if run])

        exact = types.exact_fields(types.ClaimedRun)
        return _Query(*_select("complete_and_claim",
                               {"run_id": run_id, "epoch": epoch, "result": _jsonb(result),
                                "classes": list(classes)},
                               {"worker_id": worker_id, "lease": lease, "max_runs": max_runs,
                                "kinds": None if kinds is None else list(kinds),
                                "claim_if_fenced": claim_if_fenced}),
                      _exact_row(kwargs_row(_completed_and_claimed), exact), decode, True)

    @_Call
    def complete(self, run_id: int, epoch: int, result: Any = None) -> _Query[bool]:
        """runq.complete: the run succeeded; False when fenced."""
        return _value(bool, "complete", {"run_id": run_id, "epoch": epoch},
                      {"result": _jsonb(result)})

    @_Call
    def fail(self, run_id: int, epoch: int, failure: Mapping[str, Any]) -> _Query[bool]:
        """runq.fail: the run failed for good (failure holds at least a code)."""
        return _value(bool, "fail", {"run_id": run_id, "epoch": epoch, "failure": _jsonb(failure)})

    @_Call
    def release(self, run_id: int, epoch: int) -> _Query[bool]:
        """runq.release: give the lease back now (graceful shutdown)."""
        return _value(bool, "release", {"run_id": run_id, "epoch": epoch})

    @_Call
    def ask_user(self, run_id: int, epoch: int, question: Any) -> _Query[bool]:
        """runq.ask_user: the run waits for the user's input."""
        return _value(bool, "ask_user",
                      {"run_id": run_id, "epoch": epoch, "question": _jsonb(question)})

    @_Call
    def checkpoint(self, run_id: int, epoch: int, state: Any) -> _Query[bool]:
        """runq.checkpoint: the loop state a later claim resumes from."""
        return _value(bool, "checkpoint",
                      {"run_id": run_id, "epoch": epoch, "state": _jsonb(state)})

    @_Call
    def begin_turn(self, run_id: int, epoch: int) -> _Query[bool]:
        """runq.begin_turn: call before a chargeable model call."""
        return _value(bool, "begin_turn", {"run_id": run_id, "epoch": epoch})

    @_Call
    def begin_tool(self, run_id: int, epoch: int, call_id: str, tool: str, idempotency: str,
                   args: Mapping[str, Any] | None = None) -> _Query[bool]:
        """runq.begin_tool: call before the tool executes; idempotency is
        read_only, idempotent or non_idempotent."""
        return _value(bool, "begin_tool", {
            "run_id": run_id, "epoch": epoch, "call_id": call_id, "tool": tool,
            "idempotency": idempotency}, {"args": _jsonb(args)})

    @_Call
    def end_tool(self, run_id: int, epoch: int, call_id: str, outcome: Any) -> _Query[bool]:
        """runq.end_tool: the tool call's outcome."""
        return _value(bool, "end_tool", {"run_id": run_id, "epoch": epoch,
                                         "call_id": call_id, "outcome": _jsonb(outcome)})

    @_Call
    def tool_calls(self, run_id: int) -> _Query[list[types.ToolCall]]:
        """runq.tool_calls: the run's tool calls."""
        return _rows(types.ToolCall, "tool_calls", {"run_id": run_id})

    @_Call
    def record_usage(self, run_id: int, epoch: int,
                     usage: Mapping[str, int | float | Decimal]) -> _Query[bool]:
        """runq.record_usage: add usage ({"input_tokens": 1200, "cost_usd":
        Decimal("0.0123")}) to the run's totals. Recorded even from a fenced
        epoch and after the run finished (spend is a fact); False then, as
        every fenced call. Raises InvalidArgument (also for an epoch the run
        was never claimed with), RunNotFound."""
        return _value(bool, "record_usage",
                      {"run_id": run_id, "epoch": epoch, "usage": _jsonb(usage)})

    @_Call
    def record_model_call(self, run_id: int, epoch: int, seq: int, request_hash: str,
                          response: Any, usage: Mapping[str, int | float | Decimal] | None = None
                          ) -> _Query[bool]:
        """runq.record_model_call: journal model request seq (1, 2, ...) of
        the run, its response and usage (added to the totals as
        record_usage adds it), in one transaction. False when fenced (kept,
        not replayed). Sent again, it records nothing twice."""
        return _value(bool, "record_model_call", {
            "run_id": run_id, "epoch": epoch, "seq": seq, "request_hash": request_hash,
            "response": _jsonb(response)}, {"usage": _jsonb(usage) if usage is not None else None})

    @_Call
    def model_calls(self, run_id: int) -> _Query[list[types.ModelCall]]:
        """runq.model_calls: the run's journaled model requests."""
        return _rows(types.ModelCall, "model_calls", {"run_id": run_id})

    @_Call
    def spawn(
        self,
        run_id: int,
        epoch: int,
        key: str,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        priority: int | None = None,
        max_attempts: int = 3,
        recovery_policy: str = "resume",
        timeout: timedelta | None = None,
        budget: Mapping[str, int | float | Decimal] | None = None,
    ) -> _Query[int | None]:
        """runq.spawn: a queued child run of the run, named key among its
        children (its tenant, and its parent's priority unless given); the
        child's run_id, None when fenced (nothing created). The same key
        again by the run's current epoch is the same child, whatever epoch
        spawned it. Raises IdempotencyConflict (the key with another
        request), InvalidArgument, RunNotFound."""
        return _optional(int, "spawn", {"run_id": run_id, "epoch": epoch, "key": key,
                                        "kind": kind, "max_attempts": max_attempts,
                                        "recovery_policy": recovery_policy}, {
            "payload": _jsonb(payload), "priority": priority, "timeout": timeout,
            "budget": _jsonb(budget)})

    @_Call
    def wait_children(self, run_id: int, epoch: int) -> _Query[bool]:
        """runq.wait_children: the lease ends and the run waits for its
        children (waiting_for_children), queued again once every one is
        terminal (at once when none is live); False when fenced."""
        return _value(bool, "wait_children", {"run_id": run_id, "epoch": epoch})

    # -- operators ----------------------------------------------------------

    @_Call
    def sweep(self, max_runs: int | None = None) -> _Query[list[types.SweepAction]]:
        """runq.sweep: what it did to each run it touched."""
        return _rows(types.SweepAction, "sweep", {}, {"max_runs": max_runs})

    @_Call
    def redrive(self, run_id: int, reason: str | None = None) -> _Query[bool]:
        """runq.redrive: a failed run back to queued. Raises InvalidRunState,
        SessionBusy, RunNotFound."""
        return _value(bool, "redrive", {"run_id": run_id}, {"reason": reason})

    @_Call
    def orphan_report(self, stale_after: timedelta | None = None
                      ) -> _Query[list[types.OrphanGroup]]:
        """runq.orphan_report: running runs by owner, staleness and work done."""
        return _rows(types.OrphanGroup, "orphan_report", {}, {"stale_after": stale_after})

    @_Call
    def queue_stats(self) -> _Query[list[types.QueueStats]]:
        """The runq.queue_stats view, by priority."""
        return _Query(sql.SQL("SELECT * FROM runq.queue_stats ORDER BY priority"), {},
                      class_row(types.QueueStats), list)

    @_Call
    def dead_letter(self, max_runs: int | None = None) -> _Query[list[types.Run]]:
        """runq.dead_letter: failed runs, most recently finished first."""
        return _rows(types.Run, "dead_letter", {}, {"max_runs": max_runs})

    @_Call
    def set_budget(self, run_id: int, budget: Mapping[str, int | float | Decimal] | None
                   ) -> _Query[bool]:
        """runq.set_budget: replace the budget of a queued, running, waiting or
        failed run (None removes it); False for a succeeded or cancelled run,
        which keeps its own. Raises InvalidArgument, RunNotFound."""
        return _value(bool, "set_budget", {"run_id": run_id, "budget": _jsonb(budget)})

    @_Call
    def usage_report(self, since: datetime, until: datetime | None = None
                     ) -> _Query[list[types.UsageRow]]:
        """runq.usage_report: the usage recorded in [since, until) (until None:
        up to now), fenced epochs included, per tenant and kind, in that
        order; exact sums. Raises InvalidArgument (until not after since)."""
        return _rows(types.UsageRow, "usage_report", {"since": since}, {"until": until})

    @_Call
    def list_runs(self, status: str | None = None, tenant_id: str | None = None,
                  kind: str | None = None, before_run_id: int | None = None,
                  max_runs: int | None = None) -> _Query[list[types.Run]]:
        """runq.list_runs: runs newest first, of a status, tenant and kind when
        given; the next page is before_run_id = the last run_id of this one.
        Raises InvalidArgument (an unknown status, max_runs below 1)."""
        return _rows(types.Run, "list_runs", {},
                     {"status": status, "tenant_id": tenant_id, "kind": kind,
                      "before_run_id": before_run_id, "max_runs": max_runs})

    @_Call
    def throughput(self, since: datetime) -> _Query[list[types.ThroughputRow]]:
        """runq.throughput: runs started and finished per minute since since,
        oldest minute first; minutes with neither are absent."""
        return _rows(types.ThroughputRow, "throughput", {"since": since})

    @_Call
    def recovery_totals(self) -> _Query[types.RecoveryTotals]:
        """runq.recovery_totals: the run.fenced and run.requeued events stored."""
        return _row(types.RecoveryTotals, "recovery_totals", {})

    @_Call
    def purge(self, older_than: timedelta, max_runs: int | None = None,
              include_failed: bool | None = None) -> _Query[int]:
        """runq.purge: delete one batch of runs finished before older_than ago
        (failed ones only with include_failed), with everything they own.
        Returns how many it deleted: call again until that is fewer than max_runs."""
        return _value(int, "purge", {"older_than": older_than},
                      {"max_runs": max_runs, "include_failed": include_failed})

    # -- limits and pauses --------------------------------------------------

    @_Call
    def set_limit(self, scope: str, key: str | None, max_running: int | None
                  ) -> _Query[None]:
        """runq.set_limit: at most max_running running runs per key of scope
        (tenant or kind); key None sets the default row, max_running None
        removes the row. Raises InvalidArgument."""
        return _void("set_limit", {"scope": scope, "key": key, "max_running": max_running})

    @_Call
    def limits(self) -> _Query[list[types.Limit]]:
        """The runq.limits view, by scope, the default row first."""
        return _Query(sql.SQL("SELECT * FROM runq.limits ORDER BY scope, key NULLS FIRST"), {},
                      class_row(types.Limit), list)

    @_Call
    def pause(self, scope: str, key: str, reason: str | None = None) -> _Query[bool]:
        """runq.pause: stop claims of the queued runs under a class (key: the
        class as text, '10'), kind or tenant, or the ticks of a schedule; False
        when it was paused already. Raises InvalidArgument."""
        return _value(bool, "pause", {"scope": scope, "key": key}, {"reason": reason})

    @_Call
    def resume(self, scope: str, key: str) -> _Query[bool]:
        """runq.resume: undo a pause (its runs are claimable at once); False
        when it was not paused. Raises InvalidArgument."""
        return _value(bool, "resume", {"scope": scope, "key": key})

    @_Call
    def pauses(self) -> _Query[list[types.Pause]]:
        """The runq.pauses view, by scope and key."""
        return _Query(sql.SQL("SELECT * FROM runq.pauses ORDER BY scope, key"), {},
                      class_row(types.Pause), list)

    # -- schedules ------------------------------------------------------------

    @_Call
    def create_schedule(
        self,
        name: str,
        tenant_id: str,
        kind: str,
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        payload: Mapping[str, Any] | None = None,
        priority: int | None = None,
        timezone: str | None = None,
        max_attempts: int | None = None,
        recovery_policy: str | None = None,
        queue_ttl: timedelta | None = None,
        timeout: timedelta | None = None,
    ) -> _Query[bool]:
        """runq.create_schedule: exactly one of cron ("0 3 * * *", read in
        timezone, UTC by default) and every; True when created, False when
        the schedule of that name was replaced. Raises InvalidArgument."""
        return _value(bool, "create_schedule", {"name": name, "tenant_id": tenant_id,
                                                "kind": kind}, {
            "cron": cron, "every": every, "payload": _jsonb(payload), "priority": priority,
            "timezone": timezone, "max_attempts": max_attempts,
            "recovery_policy": recovery_policy, "queue_ttl": queue_ttl, "timeout": timeout})

    @_Call
    def drop_schedule(self, name: str) -> _Query[bool]:
        """runq.drop_schedule: False when there was no schedule of that name;
        the runs it created are left as they are."""
        return _value(bool, "drop_schedule", {"name": name})

    @_Call
    def tick(self, max_runs: int | None = None) -> _Query[list[types.TickRow]]:
        """runq.tick: a run for each due slot (created), or skipped_overlap
        (the schedule's previous run is still live) or missed."""
        return _rows(types.TickRow, "tick", {}, {"max_runs": max_runs})

    @_Call
    def schedules(self) -> _Query[list[types.Schedule]]:
        """The runq.schedules view, by name."""
        return _Query(sql.SQL("SELECT * FROM runq.schedules ORDER BY name"), {},
                      class_row(types.Schedule), list)


class Client(_Calls[psycopg.Connection[Any], ConnectionPool[Any]]):
    """Synchronous runq client; see the module's documentation."""

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
        source = self._target()
        if isinstance(source, ConnectionPool):
            with source.connection() as conn:
                yield conn
        elif self._as_is(source):
            yield source
        else:  # a transaction of its own, or a savepoint in the caller's
            with source.transaction():
                yield source

    def wait(self, run_id: int, timeout: float | None = None) -> types.Run:
        """The run once it is terminal or waiting_for_user, as get_run has it;
        TimeoutError after timeout seconds (None: no limit). Woken by runq's
        notifications on a connection all the waits of the process share
        (runq.waiting); raises RunNotFound."""
        d = self._dispatcher()
        with _runq_errors():
            return d.run_sync(d.wait(run_id, timeout))

    def stream(self, run_id: int, after_seq: int = 0) -> Iterator[types.Chunk]:
        """The run's output chunks after after_seq, as they are written,
        until the run is terminal or waiting_for_user (then the last of them)."""
        d = self._dispatcher()
        with _runq_errors():
            yield from waiting.iterate(d, d.chunks(run_id, after_seq))

    def _execute(self, query: _Query[R]) -> R:
        with _runq_errors(), self._connection() as conn, \
                conn.cursor(row_factory=query.row_factory) as cur:
            if query.raw_jsonb:
                _raw_jsonb(cur)
            cur.execute(query.statement, query.params)
            return query.decode(cur.fetchall())


class AsyncClient(_Calls[psycopg.AsyncConnection[Any], AsyncConnectionPool[Any]]):
    """asyncio runq client: the same methods as Client, awaited."""

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
        source = self._target()
        if isinstance(source, AsyncConnectionPool):
            async with source.connection() as conn:
                yield conn
        elif self._as_is(source):
            yield source
        else:  # a transaction of its own, or a savepoint in the caller's
            async with source.transaction():
                yield source

    async def wait(self, run_id: int, timeout: float | None = None) -> types.Run:
        """Client.wait, awaited."""
        d = self._dispatcher()
        with _runq_errors():
            return await d.run(d.wait(run_id, timeout))

    async def stream(self, run_id: int, after_seq: int = 0) -> AsyncIterator[types.Chunk]:
        """Client.stream, as an async iterator."""
        d = self._dispatcher()
        with _runq_errors():
            async for chunk in waiting.aiterate(d, d.chunks(run_id, after_seq)):
                yield chunk

    async def _execute(self, query: _Query[R]) -> R:
        with _runq_errors():
            async with self._connection() as conn, \
                    conn.cursor(row_factory=query.row_factory) as cur:
                if query.raw_jsonb:
                    _raw_jsonb(cur)
                await cur.execute(query.statement, query.params)
                return query.decode(await cur.fetchall())
