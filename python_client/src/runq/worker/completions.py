"""Completions in batches (runq.complete_many): one batch on its way at a
time, so a lone completion waits for nothing and a burst shares round trips.
A lone completion whose slot is full also claims the slot's next run, in the
same call and transaction (runq.complete_and_claim): one round trip and one
commit a run, where a completion and a claim would take two of each."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from runq.client import AsyncClient, _jsonb
from runq.types import ClaimedRun
from runq.worker.links import BATCH, OutOfReach
from runq.worker.log import log
from runq.worker.state import Phase, RunState
from runq.worker.waits import all_set

if TYPE_CHECKING:
    from runq.worker.core import Core

# One row another session holds locked must not hold up every completion
# behind it: the lock timeout is set for this statement only, and the batch
# is then sent one by one. See heartbeats.HEARTBEAT_MANY for the form.
COMPLETE_MANY = """SELECT c.run_id, c.completed
  FROM (SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS lock_timeout) AS s
 CROSS JOIN LATERAL runq.complete_many(
           CASE WHEN s.lock_timeout IS NOT NULL THEN %(run_ids)s::bigint[] END,
           %(epochs)s::bigint[], %(results)s::jsonb[]) AS c"""


@dataclass
class Completion:
    state: RunState
    result: Any
    answer: asyncio.Future[bool]


class Completions:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.queue: asyncio.Queue[Completion] = asyncio.Queue()
        # Runs completed one by one after their batch failed: cancelled at the end.
        self.side_tasks: set[asyncio.Future[None]] = set()

    async def complete(self, state: RunState, result: Any) -> bool:
        # Queued, the run keeps its heartbeats: a batch may wait on a row lock.
        state.phase = Phase.COMPLETING
        answer: asyncio.Future[bool] = self.core.loop.create_future()
        self.queue.put_nowait(Completion(state, result, answer))
        return await asyncio.shield(answer)

    async def loop(self) -> None:
        # One batch on its way at a time: a completion that finds none waits
        # for nothing; those that come meanwhile go together next.
        while True:
            batch = [await self.queue.get()]
            while not self.queue.empty() and len(batch) < BATCH:
                batch.append(self.queue.get_nowait())
            await self.send(batch)

    async def send(self, batch: list[Completion]) -> None:
        # Their heartbeats stop here, and one already sent is waited out, so
        # that no heartbeat lands after its run's completion.
        for b in batch:
            b.state.finish()
        await all_set([b.state.not_beating for b in batch], self.core.lease)
        if len(batch) == 1 and self.core.claims.full(batch[0].state.slot):
            await self.send_and_claim(batch[0])
            return
        batch_send = BatchSend(self, batch)
        try:
            done = await self.core.db.persist(batch_send)
        except OutOfReach as error:
            for b in batch:
                settle(b.answer, error=error)
            return
        except Exception as error:
            # A locked row (lock timeout), or one element spoiled the batch (a
            # result jsonb refuses, a purged run): each on its own, off this
            # loop, so the error reaches its run only and nothing waits for it.
            log.info("complete_many: %s; completing %d runs one by one", error, len(batch))
            for b in batch:
                task = asyncio.ensure_future(self.complete_one(b, batch_send.sent))
                self.side_tasks.add(task)
                task.add_done_callback(self.side_tasks.discard)
            return
        for b in batch:
            settle(b.answer, done[b.state.run_id])

    async def complete_many(self, conn: psycopg.AsyncConnection[Any],
                            batch: list[Completion]) -> dict[int, bool]:
        cur = await conn.execute(COMPLETE_MANY, {
            "lock_timeout": self.core.lock_timeout,
            "run_ids": [b.state.run_id for b in batch],
            "epochs": [b.state.epoch for b in batch],
            "results": [_jsonb(b.result) for b in batch]})
        return dict(await cur.fetchall())

    async def send_and_claim(self, b: Completion) -> None:
        # The slot's next run starts before this one's handler gives its
        # place back (Handling.execute), so the slot loop, waiting for a
        # place, does not claim one more beside it. A fenced completion
        # claims too: the run is gone from this slot either way.
        state, slot, claims = b.state, b.state.slot, self.core.claims

        async def call(conn: psycopg.AsyncConnection[Any]) -> tuple[bool, list[ClaimedRun]]:
            got = await AsyncClient(conn).complete_and_claim(
                state.run_id, state.epoch, b.result, slot.classes,
                worker_id=self.core.pool.worker_id, lease=self.core.pool.lease, max_runs=1,
                kinds=claims.kinds, claim_if_fenced=True)
            return bool(got.completed), got.runs

        try:
            # True when a lost call had landed (persist's answer to landed):
            # the run it claimed is then left to its lease's expiry.
            done: tuple[bool, list[ClaimedRun]] | bool = await self.core.db.persist(
                call, landed=lambda conn: completed(conn, state))
        except OutOfReach as error:
            settle(b.answer, error=error)
            return
        except Exception as error:
            # It may have been sent (and committed) before it failed.
            log.info("complete_and_claim: %s; completing run %s alone", error, state.run_id)
            await self.complete_one(b, sent=True)
            return
        ok, runs = done if isinstance(done, tuple) else (True, [])
        for run in runs:
            claims.start(run, slot)
        settle(b.answer, ok)

    async def complete_one(self, b: Completion, sent: bool = False) -> None:
        """runq.complete of one run; sent: a call of an earlier try may have
        committed, so runq is asked first."""
        async def call(conn: psycopg.AsyncConnection[Any]) -> bool:
            if sent and await completed(conn, b.state):
                return True
            return await AsyncClient(conn).complete(b.state.run_id, b.state.epoch, b.result)

        try:
            settle(b.answer, await self.core.db.persist(
                call, landed=lambda conn: completed(conn, b.state)))
        except Exception as error:
            settle(b.answer, error=error)


class BatchSend:
    """complete_many of a batch, for Database.persist. Sent again after its
    connection broke, it first settles the runs the lost call completed (a
    failover can take the answer of a commit the standby has), which a
    second complete would refuse, logging a run.fenced no stale worker
    caused. ``sent``: a call went out, and may have committed."""

    def __init__(self, completions: Completions, batch: list[Completion]) -> None:
        self.completions = completions
        self.batch = batch
        self.sent = False

    async def __call__(self, conn: psycopg.AsyncConnection[Any]) -> dict[int, bool]:
        done: dict[int, bool] = {}
        if self.sent:
            done = {b.state.run_id: True for b in self.batch if await completed(conn, b.state)}
        self.sent = True
        rest = [b for b in self.batch if b.state.run_id not in done]
        return done | (await self.completions.complete_many(conn, rest) if rest else {})


async def completed(conn: psycopg.AsyncConnection[Any], state: RunState) -> bool:
    """Whether the run succeeded under our epoch: a lost complete of ours landed."""
    run = await AsyncClient(conn).get_run(state.run_id)
    return run.status == "succeeded" and run.lease_epoch == state.epoch


def settle(answer: asyncio.Future[bool], value: bool = False,
           error: BaseException | None = None) -> None:
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(value)
