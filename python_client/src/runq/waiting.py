"""Waiting for runs and reading their output as it is written: the
dispatcher behind Client.wait / Client.stream and their AsyncClient twins.

All the waits and streams of a process on one database share one
dispatcher: a thread of its own ("runq-wait") running an event loop with two
connections, one that only LISTENs on runq_run and one for the calls
(runq.watch, runq.get_run, runq.read_output, runq.unwatch). A wait registers
its run, then watches it (runq.watch, after LISTEN: no wake-up is lost), then
reads the run again on each notification until it is terminal or waits for
its user. runq notifies only runs someone watches, so a process waiting on a
thousand runs costs the database two connections and a notification per
change of those runs.

A connection that broke is opened again; the watches are then made again on
the new calls connection (a watch lives as long as its session), and every
wait reads its run again, since notifications sent meanwhile were lost.
While no connection listens (the server is away), the waits read their runs
every FALLBACK seconds; while one does, a wait reads its run only when
notified. The dispatcher counts the reads the fallback made (``polls``).

A woken wait or stream reads its run's status, and a stream its new output
too, in one statement (one snapshot: a status read as ended comes with the
last of the output, since no chunk commits after the end); the reads of
every wait woken meanwhile go in that same statement (READ below), so a
thousand streams cost a statement a wake-up round, not one a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from functools import partial
from typing import Any, TypeVar

import psycopg

from runq import types

T = TypeVar("T")

# Statuses a wait returns at: an answer exists, or the run needs its user.
SETTLED = frozenset({"succeeded", "failed", "cancelled", "waiting_for_user"})
# Seconds between reads of a run no notification woke (the safety net only).
FALLBACK = 30.0
# Seconds between attempts to open a connection that broke.
RECONNECT = 0.5
# The most chunks one read returns for a run; a stream reads again at once
# after a full one.
PAGE = 1000

# Each run's status and its output after a seq, for many runs in one
# statement and one snapshot. after_seq NULL: the status only (no seq is after
# the largest bigint).
READ = """SELECT u.i, r.status, o.seq, o.epoch, o.chunk, o.created_at
  FROM unnest(%(run_ids)s::bigint[], %(after)s::bigint[]) WITH ORDINALITY
       AS u (run_id, after_seq, i)
 CROSS JOIN LATERAL runq.get_run(u.run_id) AS r
  LEFT JOIN LATERAL runq.read_output(u.run_id, coalesce(u.after_seq, 9223372036854775807),
                                     %(page)s) AS o ON true
 ORDER BY u.i, o.seq"""

Reading = tuple[str, list[types.Chunk]]  # a run's status, its chunks read


class Dispatcher:
    """The waits of one process on one database (see the module's text).
    Its coroutines run on its own loop; ``run`` hands one over from any
    thread or loop."""

    def __init__(self, conninfo: str, kwargs: dict[str, Any]) -> None:
        self.conninfo = conninfo
        self.kwargs = {**kwargs, "autocommit": True}
        self.loop = asyncio.new_event_loop()
        # run_id -> the wake-ups of the waits on it (events of self.loop)
        self.waiters: dict[int, set[asyncio.Event]] = {}
        self.polls = 0  # reads of a run that only FALLBACK woke
        self.woken = 0  # waits a notification woke
        self._calls: psycopg.AsyncConnection[Any] | None = None
        self._reconnects = 0
        self._one_call = asyncio.Lock()
        # Reads asked for since the last READ went: (run_id, after_seq, answer).
        self._asked: list[tuple[int, int | None, asyncio.Future[Reading]]] = []
        self._reading: asyncio.Task[None] | None = None
        self._listening: asyncio.Event | None = None
        self._wanted: asyncio.Event | None = None  # some wait is registered
        thread = threading.Thread(target=self._serve, name="runq-wait", daemon=True)
        thread.start()

    # -- from any thread --------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """coro on the dispatcher's loop, as an awaitable of the caller's loop."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    # -- on the dispatcher's loop ----------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._listening = asyncio.Event()
        self._wanted = asyncio.Event()
        self.loop.create_task(self._listen())
        self.loop.run_forever()

    async def _listen(self) -> None:
        assert self._listening is not None and self._wanted is not None
        while True:
            # Connected only while some wait needs it: a database that went
            # is not tried again and again for nobody.
            await self._wanted.wait()
            try:
                async with await psycopg.AsyncConnection.connect(
                        self.conninfo, **{**self.kwargs,
                                          "application_name": "runq-wait-listen"}) as conn:
                    await conn.execute("LISTEN runq_run")
                    # Notifications sent while no connection listened are
                    # lost: every watch is made again and every wait reads
                    # its run again.
                    await self._rewatch()
                    self._listening.set()
                    async for note in conn.notifies():
                        self._wake(int(note.payload))
            except (psycopg.OperationalError, psycopg.InterfaceError):
                self._listening.clear()
                self._wake_all()  # to poll while no connection listens
                await asyncio.sleep(RECONNECT)

    def _wake_all(self) -> None:
        for events in self.waiters.values():
            for event in events:
                event.set()

    def _patience(self) -> float | None:
        """How long a wait sleeps: until notified (None) while a connection
        listens, FALLBACK seconds while none does."""
        assert self._listening is not None
        return None if self._listening.is_set() else FALLBACK

    def _wake(self, run_id: int) -> None:
        for event in self.waiters.get(run_id, ()):
            self.woken += 1
            event.set()

    async def _rewatch(self) -> None:
        for run_id in list(self.waiters):
            with contextlib.suppress(psycopg.Error):  # purged: its wait gets the error
                await self._get_run(run_id, watch=True)
        self._wake_all()

    async def _call(self, call: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """call on the calls connection, opened again (and the watches with
        it) when it broke; the error of a statement is raised."""
        while True:
            conn = self._calls
            if conn is None or conn.closed or conn.broken:
                try:
                    conn = self._calls = await psycopg.AsyncConnection.connect(
                        self.conninfo, **{**self.kwargs, "application_name": "runq-wait"})
                except psycopg.OperationalError:
                    if not self._reconnects:
                        raise  # never connected: a wrong URL, not an outage
                    # The server went away: tried again until it is back (a
                    # wait's timeout ends the wait meanwhile).
                    await asyncio.sleep(RECONNECT)
                    continue
                if self._reconnects:
                    # The watches of the old session go with it.
                    self.loop.create_task(self._rewatch())
                self._reconnects += 1
            try:
                # One call at a time: a client sends a call on a connection
                # that is not idle in a transaction of its own, and two
                # interleaved would leave one open (holding the run's lock).
                async with self._one_call:
                    return await call(conn)
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if not (conn.closed or conn.broken):
                    raise
                await asyncio.sleep(RECONNECT)

    async def _ready(self) -> None:
        assert self._listening is not None
        await self._listening.wait()

    async def _get_run(self, run_id: int, watch: bool = False) -> types.Run:
        from runq.client import AsyncClient  # runq.client imports this module
        if watch:
            return await self._call(lambda c: AsyncClient(c).watch(run_id))
        return await self._call(lambda c: AsyncClient(c).get_run(run_id))

    async def _status_and_output(self, run_id: int, after_seq: int | None) -> Reading:
        """The run's status and (after_seq given) its chunks after after_seq,
        read with the other reads asked for meanwhile (READ)."""
        answer: asyncio.Future[Reading] = self.loop.create_future()
        self._asked.append((run_id, after_seq, answer))
        if self._reading is None or self._reading.done():
            self._reading = self.loop.create_task(self._read_asked())
        return await answer

    async def _read_asked(self) -> None:
        while self._asked:
            asked, self._asked = self._asked, []
            try:
                answered = await self._call(partial(self._read_many, asked=asked))
            except Exception:
                # One run spoiled the statement (purged: RQ003): each on its
                # own, so that the error reaches its reader only.
                for one in asked:
                    try:
                        alone = await self._call(partial(self._read_many, asked=[one]))
                    except Exception as error:
                        if not one[2].done():
                            one[2].set_exception(error)
                        continue
                    self._answer([one], alone)
                continue
            self._answer(asked, answered)

    @staticmethod
    def _answer(asked: list[tuple[int, int | None, asyncio.Future[Reading]]],
                answered: dict[int, Reading]) -> None:
        for i, (_, _, answer) in enumerate(asked, 1):
            if not answer.done():  # a wait that timed out meanwhile
                answer.set_result(answered.get(i, ("", [])))

    @staticmethod
    async def _read_many(conn: psycopg.AsyncConnection[Any],
                         asked: list[tuple[int, int | None, asyncio.Future[Reading]]]
                         ) -> dict[int, Reading]:
        from runq.client import _runq_errors
        with _runq_errors():
            cur = await conn.execute(READ, {"run_ids": [r for r, _, _ in asked],
                                            "after": [a for _, a, _ in asked], "page": PAGE})
            out: dict[int, Reading] = {}
            for i, status, seq, epoch, chunk, created_at in await cur.fetchall():
                _, chunks = out.setdefault(int(i), (status, []))
                if seq is not None:
                    chunks.append(types.Chunk(seq, epoch, chunk, created_at))
            return out

    async def _subscribe(self, run_id: int) -> asyncio.Event:
        assert self._wanted is not None
        event = asyncio.Event()
        self.waiters.setdefault(run_id, set()).add(event)
        self._wanted.set()
        try:
            await self._ready()
        except BaseException:
            await self._unsubscribe(run_id, event)
            raise
        return event

    async def _unsubscribe(self, run_id: int, event: asyncio.Event) -> None:
        events = self.waiters.get(run_id, set())
        events.discard(event)
        if not events:
            self.waiters.pop(run_id, None)
            if not self.waiters and self._wanted is not None:
                self._wanted.clear()
            from runq.client import AsyncClient
            # A purged run's watch went with it, a broken session's with the session.
            with contextlib.suppress(psycopg.Error):
                await self._call(lambda c: AsyncClient(c).unwatch(run_id))

    async def _woken(self, event: asyncio.Event, timeout: float | None) -> bool:
        """Until a notification (True) or timeout (False)."""
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        event.clear()
        return True

    async def wait(self, run_id: int, timeout: float | None) -> types.Run:
        try:
            return await asyncio.wait_for(self._wait(run_id), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"run {run_id} did not end within {timeout:g} s") from None

    async def _wait(self, run_id: int) -> types.Run:
        event = await self._subscribe(run_id)
        try:
            run = await self._get_run(run_id, watch=True)
            if run.status in SETTLED:
                return run
            while True:
                if not await self._woken(event, self._patience()):
                    self.polls += 1
                status, _ = await self._status_and_output(run_id, None)
                if status in SETTLED:
                    return await self._get_run(run_id)  # the whole run, as get_run reads it
        finally:
            await self._unsubscribe(run_id, event)

    async def chunks(self, run_id: int, after_seq: int
                     ) -> AsyncGenerator[list[types.Chunk], None]:
        """The run's chunks after after_seq as they come, a read's worth at a
        time (one hop between loops a read, not a chunk), until the run is
        terminal or waits for its user."""
        event = await self._subscribe(run_id)
        try:
            await self._get_run(run_id, watch=True)
            while True:
                status, got = await self._status_and_output(run_id, after_seq)
                if got:
                    after_seq = got[-1].seq
                    yield got
                if len(got) == PAGE:
                    continue  # there is more
                if status in SETTLED:
                    return  # read in one snapshot with its last chunk
                if not await self._woken(event, self._patience()):
                    self.polls += 1
        finally:
            await self._unsubscribe(run_id, event)


_dispatchers: dict[str, Dispatcher] = {}
_lock = threading.Lock()


def dispatcher(conninfo: str, kwargs: dict[str, Any]) -> Dispatcher:
    """The process's dispatcher for this database (made on first use)."""
    with _lock:
        found = _dispatchers.get(conninfo)
        if found is None:
            found = _dispatchers[conninfo] = Dispatcher(conninfo, kwargs)
        return found


def iterate(d: Dispatcher, chunks: AsyncGenerator[list[types.Chunk], None]
            ) -> Iterator[types.Chunk]:
    """Dispatcher.chunks from a thread that has no loop (Client.stream)."""
    try:
        while True:
            try:
                yield from d.run_sync(_step(chunks))
            except StopAsyncIteration:
                return
    finally:
        d.run_sync(_close(chunks))


async def aiterate(d: Dispatcher, chunks: AsyncGenerator[list[types.Chunk], None]
                   ) -> AsyncIterator[types.Chunk]:
    """Dispatcher.chunks from another loop (AsyncClient.stream)."""
    try:
        while True:
            try:
                got = await d.run(_step(chunks))
            except StopAsyncIteration:
                return
            for chunk in got:
                yield chunk
    finally:
        await d.run(_close(chunks))


async def _step(chunks: AsyncGenerator[list[types.Chunk], None]) -> list[types.Chunk]:
    return await chunks.__anext__()


async def _close(chunks: AsyncGenerator[list[types.Chunk], None]) -> None:
    await chunks.aclose()
