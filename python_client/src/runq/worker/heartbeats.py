"""Heartbeats: every lease/3 one runq.heartbeat_many keeps the lease of every
run in flight, on a connection of its own; a run whose element comes back
false is stopped at once."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import psycopg

from runq.errors import RunNotFound
from runq.worker.links import BATCH, Link, lost
from runq.worker.log import log
from runq.worker.state import RunState

if TYPE_CHECKING:
    from runq.worker.core import Core

# A heartbeat waits at most a lock timeout for a row another session holds
# locked. It is set for that one statement only (set_config(..., true)):
# safe behind PgBouncer in transaction mode, where a SET would stay on the
# server connection for whichever client comes next. The CASE makes the
# function's argument depend on set_config, so the planner cannot call the
# function first.
HEARTBEAT_MANY = """SELECT h.run_id, h.alive
  FROM (SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS lock_timeout) AS s
 CROSS JOIN LATERAL runq.heartbeat_many(
           CASE WHEN s.lock_timeout IS NOT NULL THEN %(run_ids)s::bigint[] END,
           %(epochs)s::bigint[]) AS h"""

LOCK_NOT_AVAILABLE = "55P03"


class Heartbeats:
    def __init__(self, core: Core) -> None:
        self.core = core

    async def loop(self) -> None:
        pool = self.core.pool
        interval = self.core.lease / 3
        lock_timeout = self.core.lock_timeout
        link = Link(pool.conninfo, pool._connect_kwargs("runq-pool-heartbeat"))
        try:
            await link.connection()  # at start, as every loop: a bad conninfo shows at once
            while True:
                started = time.monotonic()
                await self.beat(link, lock_timeout)
                pause = interval - (time.monotonic() - started)
                if link.lost:
                    pause = min(pause, pool.poll_interval)
                await asyncio.sleep(max(0.0, pause))
        finally:
            await link.close()

    async def beat(self, link: Link, lock_timeout: str) -> None:
        """One heartbeat for every run in flight: those whose row was locked
        last time one by one, the rest in batches."""
        states = [s for s in self.core.runs.values() if not s.done]
        for s in states:
            s.not_beating.clear()
        try:
            conn = await link.connection()
            alone = [s for s in states if s.alone]
            together = [s for s in states if not s.alone]
            for i in range(0, len(together), BATCH):
                batch = together[i:i + BATCH]
                try:
                    cur = await conn.execute(HEARTBEAT_MANY, {
                        "lock_timeout": lock_timeout, "run_ids": [s.run_id for s in batch],
                        "epochs": [s.epoch for s in batch]})
                    alive = dict(await cur.fetchall())
                except psycopg.Error as error:
                    if lost(conn):
                        raise
                    # A locked row (lock timeout) or a purged run (RQ003):
                    # find out which, one by one.
                    log.info("heartbeat_many: %s; beating %d runs one by one", error, len(batch))
                    alone += batch
                    continue
                for s in batch:
                    if alive[s.run_id] is False:
                        self.core.stop_run(s)
                    s.not_beating.set()  # a final write waiting for it may go now
            for s in alone:
                await self.beat_alone(conn, s, lock_timeout)
                s.not_beating.set()
        except psycopg.Error as error:
            log.warning("heartbeats: lost the database (%s)", error)
        finally:
            for s in states:
                s.not_beating.set()

    async def beat_alone(self, conn: psycopg.AsyncConnection[Any], state: RunState,
                         lock_timeout: str) -> None:
        try:
            cur = await conn.execute(HEARTBEAT_MANY, {
                "lock_timeout": lock_timeout, "run_ids": [state.run_id], "epochs": [state.epoch]})
            row = await cur.fetchone()
        except psycopg.Error as error:
            if lost(conn):
                raise
            if error.sqlstate == RunNotFound.sqlstate:
                log.warning("run %s no longer exists; dropping it", state.run_id)
                self.core.stop_run(state)
            else:
                state.alone = error.sqlstate == LOCK_NOT_AVAILABLE
                log.warning("heartbeat of run %s: %s", state.run_id, error)
            return
        state.alone = False
        if row is not None and row[1] is False:
            self.core.stop_run(state)
