"""Output (runq.emit): a handler's ctx.emit only adds a chunk to its run's
buffer; every GATHER seconds the buffers of all runs go out together, one
statement for them all, so a thousand runs writing tokens cost the database
a few statements a tick, not one per token. A run's buffer is also sent
(flushed) before its last write (complete, fail, ask_user, wait_children),
and a false answer stops the run as any refused write does.

Sent again after a lost connection, an emit would store its chunks twice.
So the pool counts the chunks of each run that landed, and before sending a
batch again asks whether the lost one landed: its run's output under our
epoch then holds that many more chunks (our epoch is ours alone).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import psycopg

from runq.client import AsyncClient, _jsonb
from runq.worker.links import OutOfReach
from runq.worker.log import log
from runq.worker.state import RunState

if TYPE_CHECKING:
    from runq.worker.core import Core

# A screen shows a frame every 16 ms: gathering 10 ms of chunks adds less than
# a frame to what a reader sees, and turns a token a statement into a tick's
# tokens of every run a statement.
GATHER = 0.010

EMIT_MANY = """SELECT u.run_id,
       runq.emit(u.run_id, u.epoch, ARRAY(SELECT jsonb_array_elements(u.chunks)))
  FROM unnest(%(run_ids)s::bigint[], %(epochs)s::bigint[], %(chunks)s::jsonb[])
       AS u (run_id, epoch, chunks)"""

LANDED = """SELECT count(*) FROM runq.read_output(%(run_id)s, 0, 2147483647) AS o
 WHERE o.epoch = %(epoch)s"""


class Emits:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.pending: dict[RunState, list[Any]] = {}
        self.ready = asyncio.Event()
        # The send under way, which a flush must wait out: it may hold the
        # run's earlier chunks.
        self.sending: asyncio.Future[None] | None = None

    def add(self, state: RunState, chunk: Any) -> None:
        self.pending.setdefault(state, []).append(chunk)
        self.ready.set()

    async def loop(self) -> None:
        while True:
            await self.ready.wait()
            await asyncio.sleep(GATHER)
            self.ready.clear()
            await self.send_pending()

    async def send_pending(self, only: RunState | None = None) -> None:
        while self.sending is not None:
            await asyncio.shield(self.sending)
        if only is not None:
            batch = {only: self.pending.pop(only)} if only in self.pending else {}
        else:
            batch, self.pending = self.pending, {}
        if not batch:
            return
        self.sending = self.core.loop.create_future()
        try:
            await self.send(batch)
        finally:
            self.sending.set_result(None)
            self.sending = None

    async def flush(self, state: RunState) -> None:
        """Its buffered chunks sent, before its last write."""
        await self.send_pending(state)

    async def send(self, batch: dict[RunState, list[Any]]) -> None:
        # In run_id order, as every batch locks its rows: no deadlock between them.
        states = sorted((s for s in batch if not s.stopped), key=lambda s: s.run_id)
        if not states:
            return
        first = states[0]
        expected = first.chunks_landed + len(batch[first])

        async def call(conn: psycopg.AsyncConnection[Any]) -> dict[int, bool]:
            cur = await conn.execute(EMIT_MANY, {
                "run_ids": [s.run_id for s in states], "epochs": [s.epoch for s in states],
                "chunks": [_jsonb(batch[s]) for s in states]})
            return dict(await cur.fetchall())

        async def landed(conn: psycopg.AsyncConnection[Any]) -> bool:
            # One transaction: the first run's chunks landed iff all did.
            cur = await conn.execute(LANDED, {"run_id": first.run_id, "epoch": first.epoch})
            row = await cur.fetchone()
            return row is not None and row[0] >= expected

        try:
            done: dict[int, bool] | bool = await self.core.db.persist(call, landed=landed)
        except OutOfReach as error:
            log.warning("emit: %s; the chunks of %d runs are lost", error, len(states))
            return
        except psycopg.Error as error:
            # One run spoiled the statement (purged, a chunk jsonb refuses):
            # each on its own, so that the error stops that run only.
            log.info("emit: %s; sending %d runs' chunks one by one", error, len(states))
            for s in states:
                await self.send_one(s, batch[s])
            return
        for s in states:
            ok = done if isinstance(done, bool) else done[s.run_id]
            self.settle(s, len(batch[s]), ok)

    async def send_one(self, state: RunState, chunks: list[Any]) -> None:
        try:
            ok = await self.core.db.persist(
                lambda conn: AsyncClient(conn).emit(state.run_id, state.epoch, chunks))
        except Exception as error:
            log.warning("run %s: its output was refused: %s", state.run_id, error)
            ok = False
        self.settle(state, len(chunks), ok)

    def settle(self, state: RunState, count: int, ok: bool) -> None:
        if ok:
            state.chunks_landed += count
        elif not state.stopped:
            self.core.stop_run(state)
