"""The pool's connections: the shared psycopg_pool its writes, claims and
sweeps go through (a write sent again on a new connection when its own
broke), and the connections of its own that heartbeats and LISTEN hold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from runq.client import AsyncClient
from runq.worker.log import log

T = TypeVar("T")

# Largest heartbeat_many or complete_many: one statement each, whatever the
# number of runs in flight, up to this.
BATCH = 5000


def connect_kwargs(application_name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    # No server-side prepared statements: behind PgBouncer in transaction
    # mode they land on another server connection. They would save little:
    # each call is one function call, whose plans the server caches.
    # A server that vanished without closing the socket (a host gone, a
    # network cut) is noticed in seconds, not at TCP's fifteen minutes.
    return {"application_name": application_name, "prepare_threshold": None,
            "autocommit": True, "connect_timeout": 5, "keepalives": 1,
            "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
            "tcp_user_timeout": 10_000, **overrides}


def lost(conn: psycopg.AsyncConnection[Any]) -> bool:
    return conn.closed or conn.broken


class ConnectionLost(Exception):
    pass


class OutOfReach(psycopg.OperationalError):
    """No connection would carry the call for its whole patience."""


def on_client(call: Callable[[AsyncClient], Awaitable[T]]
              ) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]:
    return lambda conn: call(AsyncClient(conn))


class Link:
    """A connection of the pool's own (heartbeats, LISTEN): opened on first
    use, and again after it broke."""

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any]) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._conn: psycopg.AsyncConnection[Any] | None = None

    @property
    def lost(self) -> bool:
        return self._conn is None or lost(self._conn)

    async def connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or lost(self._conn):
            await self.close()
            self._conn = await psycopg.AsyncConnection.connect(self._conninfo, **self._kwargs)
        return self._conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # already broken: nothing to give back
                log.debug("closing a broken connection failed", exc_info=True)


class Database:
    """The connections the runs' writes, the claims and the sweeps share."""

    def __init__(self, conninfo: str, max_size: int, kwargs: dict[str, Any],
                 lease: float) -> None:
        self.lease = lease
        self.pool = AsyncConnectionPool(conninfo, min_size=1, max_size=max_size, open=False,
                                        kwargs=kwargs, name="runq-pool")

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        return self.pool.connection()

    async def open(self) -> None:
        await self.pool.open(wait=False)

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.pool.close(timeout=0.5), 1.0)
        except Exception:
            log.debug("closing the connection pool failed", exc_info=True)

    async def persist(self, call: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
                      patience: float | None = None,
                      landed: Callable[[psycopg.AsyncConnection[Any]], Awaitable[bool]] | None
                      = None) -> T:
        """``call`` on a connection of the pool; sent again on another for up
        to ``patience`` seconds (a lease) while the connection is what
        failed. An error of the statement itself is raised at once.

        A call whose connection broke after it was sent may have committed.
        Sending a fenced write again is safe (it applies once, or answers
        false), but not always quiet: ``landed``, when given, asks the
        database first whether the lost call took effect."""
        deadline = time.monotonic() + (self.lease if patience is None else patience)
        pause = 0.05
        sent = False
        while True:
            failed: psycopg.Error | None = None
            try:
                async with self.pool.connection(
                        timeout=max(0.1, deadline - time.monotonic())) as conn:
                    try:
                        if sent and landed is not None and await landed(conn):
                            return True  # type: ignore[return-value]
                        sent = True
                        return await call(conn)
                    except psycopg.Error as error:
                        if lost(conn):
                            raise ConnectionLost(str(error)) from None
                        failed = error  # the statement's own error: raised below, at once
            except (ConnectionLost, psycopg.OperationalError) as error:
                # The connection broke, or none could be had (PoolTimeout).
                if time.monotonic() >= deadline:
                    raise OutOfReach(f"the database stayed out of reach: {error}") from None
                log.warning("lost the database (%s); trying again", error)
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 1.0)
                continue
            raise failed
