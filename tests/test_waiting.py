"""Waiting for a run and reading its output as it is written (runq.watch,
runq.emit, runq.read_output), through Client.wait / Client.stream and their
AsyncClient twins. Real server; workers are other connections of the test.

  test_wait_answers_when_the_run_ends_or_waits
      wait returns a run completed, failed, cancelled or made to wait for its
      user by another session while it waited, at once for a run already
      ended, raises TimeoutError for a run still queued at its timeout and
      RunNotFound for no run; it leaves no watch behind (runq.watches empty).
  test_no_lost_wake_up_race
      LISTEN + watch against a worker completing at random offsets (0-100 ms
      after the waits start, before, during and after their watches): ROUNDS
      rounds of 50 waits at once, each answered succeeded, most by a notification
      (Dispatcher.woken), none by the slow fallback poll (Dispatcher.polls
      unchanged), all on the process's two connections of the dispatcher.
      Every third round, the LISTEN connection is terminated at a random
      offset among the completions too. ROUNDS is 6 in make test (300 waits,
      2 drops); the 10,000-wait form is test_no_lost_wake_up_race_long
      (marked once: 200 rounds, 66 drops).
  test_dropped_listen_connection
      the dispatcher's LISTEN connection is terminated (pg_terminate_backend)
      while 20 waits are pending, and the runs are completed while it is
      away or coming back: every wait returns succeeded, none through the
      fallback poll; so does a wait whose calls connection was terminated.
  test_waits_survive_a_server_restart
      a private cluster restarts (pg_ctl restart -m fast) under 10 pending
      waits and a stream: once it is back, the runs completed and their
      output emitted are seen by each (the waits read their runs again when
      the dispatcher listens again; none through the fallback poll).
  test_stream_readers_and_emitters
      four emitters on one run (the same epoch, 50 emits of 1-3 chunks each)
      and three streams reading at once: each stream gets seq 1..n once, in
      order, every chunk emitted exactly once, and ends when the run is
      completed, with its last chunk.
  test_fenced_emitter_chunks_never_appear
      a run whose lease was taken by a second claim: the first claim's
      emits return false and none of its chunks is ever read; the second's
      continue the numbering after the first's earlier chunks (epoch 1, then
      epoch 2), and a stream started after seq 2 resumes there.
  test_async_wait_and_stream
      AsyncClient.wait and AsyncClient.stream on a user's own loop.
"""
from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from runq import AsyncClient, Client, RunNotFound
from runq.waiting import dispatcher

ROUNDS = int(os.environ.get("RUNQ_WAIT_ROUNDS", "6"))


def claimed(client: Client, n: int = 1, tenant: str = "w") -> list[tuple[int, int]]:
    ids = [client.submit(tenant, "wait.test", {"i": i}, priority=7).run_id for i in range(n)]
    runs = client.claim([7], max_runs=n)
    assert sorted(r.run_id for r in runs) == sorted(ids)
    return [(r.run_id, r.epoch) for r in runs]


def polls(url: str) -> int:
    return dispatcher(url, {}).polls


def test_wait_answers_when_the_run_ends_or_waits(db_url: str) -> None:
    with Client.connect(db_url) as c, Client.connect(db_url) as worker:
        runs = claimed(c, 4)
        endings: list[Callable[[int, int], Any]] = [
            lambda r, e: worker.complete(r, e, {"ok": 1}),
            lambda r, e: worker.fail(r, e, {"code": "boom"}),
            lambda r, e: worker.cancel(r),  # running: ends at the heartbeat
            lambda r, e: worker.ask_user(r, e, {"q": "?"}),
        ]
        with ThreadPoolExecutor(4) as pool:
            waits = [pool.submit(c.wait, r, 10) for r, _ in runs]
            time.sleep(0.2)
            for (r, e), end in zip(runs, endings, strict=True):
                end(r, e)
            worker.heartbeat(*runs[2])  # the cancelled run ends here
            got = [w.result(timeout=10).status for w in waits]
        assert got == ["succeeded", "failed", "cancelled", "waiting_for_user"]
        started = time.monotonic()
        assert c.wait(runs[0][0], timeout=1).status == "succeeded"
        assert time.monotonic() - started < 0.5
        queued = c.submit("w", "wait.test", priority=8).run_id
        with pytest.raises(TimeoutError):
            c.wait(queued, timeout=0.3)
        with pytest.raises(RunNotFound):
            c.wait(10**12, timeout=1)
        with psycopg.connect(db_url) as conn:
            assert conn.execute("SELECT count(*) FROM runq.watches").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM runq.runs WHERE watched").fetchone() == (0,)


def race(db_url: str, rounds: int) -> None:
    d = dispatcher(db_url, {})
    before, woken, drops = d.polls, d.woken, 0
    with Client.connect(db_url) as c, Client.connect(db_url) as worker:
        for round_ in range(rounds):
            runs = claimed(c, 50, tenant="race")
            # Not in the last round: the listener is back by the end.
            drop = round_ % 3 == 1 and round_ < rounds - 1
            if drop:  # the listener of the last drop is back before the next
                assert d._listening is not None
                for _ in range(100):
                    if d._listening.is_set():
                        break
                    time.sleep(0.05)
            with ThreadPoolExecutor(50) as pool:
                waits = [pool.submit(c.wait, r, 20) for r, _ in runs]
                # Spread over the time the 50 watches take (one connection):
                # some runs end before their watch, some during, most after;
                # in a drop round the listener goes among them.
                ends: list[tuple[float, Callable[[], Any]]] = [
                    (random.uniform(0, 0.1), lambda r=r, e=e: worker.complete(r, e))
                    for r, e in runs]
                if drop:
                    ends.append((random.uniform(0, 0.1),
                                 lambda: terminate(db_url, "runq-wait-listen")))
                t0 = time.monotonic()
                for at, end in sorted(ends, key=lambda x: x[0]):
                    delay = t0 + at - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    assert end() is not False
                drops += drop
                assert [w.result(timeout=25).status for w in waits] == ["succeeded"] * 50
    assert d.polls == before, "a wait ended only through the fallback poll"
    assert drops == len(range(1, rounds - 1, 3))
    # Most waits were answered by a notification, not by their watch.
    assert d.woken - woken > rounds * 25
    with psycopg.connect(db_url) as conn:
        [(n,)] = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                              " current_database() AND application_name LIKE 'runq-wait%'"
                              ).fetchall()
        assert n == 2


def test_no_lost_wake_up_race(db_url: str) -> None:
    race(db_url, ROUNDS)


@pytest.mark.once
def test_no_lost_wake_up_race_long(db_url: str) -> None:
    race(db_url, 200)  # 200 rounds of 50: 10,000 waits


def terminate(url: str, application_name: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        [(n,)] = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [application_name]).fetchall()
        assert n == 1, application_name


def test_dropped_listen_connection(db_url: str) -> None:
    before = polls(db_url)
    with Client.connect(db_url) as c, Client.connect(db_url) as worker:
        for victim in ("runq-wait-listen", "runq-wait"):
            runs = claimed(c, 20, tenant="drop")
            with ThreadPoolExecutor(20) as pool:
                waits = [pool.submit(c.wait, r, 20) for r, _ in runs]
                time.sleep(0.3)  # every wait is watching
                terminate(db_url, victim)
                for i, (r, e) in enumerate(runs):
                    assert worker.complete(r, e)
                    if i % 5 == 0:
                        time.sleep(0.1)  # some while it is away, some after
                assert [w.result(timeout=25).status for w in waits] == ["succeeded"] * 20
    assert polls(db_url) == before


def test_stream_readers_and_emitters(db_url: str) -> None:
    with Client.connect(db_url) as c:
        [(run, epoch)] = claimed(c, tenant="stream")
        emitted: list[tuple[int, int]] = []
        lock = threading.Lock()

        def emitter(k: int) -> None:
            with Client.connect(db_url) as w:
                for j in range(50):
                    chunk = [[k, j, m] for m in range(random.randint(1, 3))]
                    assert w.emit(run, epoch, chunk)
                    with lock:
                        emitted.extend((k, j) for _ in chunk)

        def reader() -> list[Any]:
            with Client.connect(db_url) as r:
                return [(ch.seq, ch.epoch, ch.chunk) for ch in r.stream(run)]

        with ThreadPoolExecutor(7) as pool:
            readers = [pool.submit(reader) for _ in range(3)]
            emitters = [pool.submit(emitter, k) for k in range(4)]
            for e in emitters:
                e.result(timeout=60)
            assert c.complete(run, epoch)
            seen = [r.result(timeout=30) for r in readers]
        n = len(emitted)
        for got in seen:
            assert [s for s, _, _ in got] == list(range(1, n + 1))
            assert {e for _, e, _ in got} == {1}
            assert sorted(tuple(ch) for _, _, ch in got) == sorted(
                tuple(x.chunk) for x in c.read_output(run, max_chunks=n))
            # each emit's chunks together and in order
            for (_, _, a), (_, _, b) in zip(got, got[1:], strict=False):
                if a[:2] == b[:2]:
                    assert b[2] == a[2] + 1


def test_fenced_emitter_chunks_never_appear(db_url: str) -> None:
    with Client.connect(db_url) as c:
        [(run, first)] = claimed(c, tenant="fence")
        assert c.emit(run, first, ["a", "b"])
        assert c.release(run, first)
        [again] = c.claim([7])
        assert (again.run_id, again.epoch) == (run, 2)
        assert not c.emit(run, first, ["stale"])
        assert c.emit(run, 2, ["c"])
        assert not c.emit(run, first, ["stale again"])
        assert c.complete(run, 2)
        chunks = [(ch.seq, ch.epoch, ch.chunk) for ch in c.stream(run)]
        assert chunks == [(1, 1, "a"), (2, 1, "b"), (3, 2, "c")]
        assert [(ch.seq, ch.chunk) for ch in c.stream(run, after_seq=2)] == [(3, "c")]


def test_async_wait_and_stream(db_url: str) -> None:
    async def main() -> tuple[str, list[Any]]:
        async with AsyncClient.connect(db_url) as c, AsyncClient.connect(db_url) as w:
            run = (await c.submit("async", "wait.test", priority=6)).run_id
            [got] = await c.claim([6])

            async def work() -> None:
                await asyncio.sleep(0.2)
                assert await w.emit(run, got.epoch, [1, 2])
                await asyncio.sleep(0.05)
                assert await w.complete(run, got.epoch, {"done": True})

            task = asyncio.ensure_future(work())
            chunks = [ch.chunk async for ch in c.stream(run)]
            status = (await c.wait(run, timeout=5)).status
            await task
            return status, chunks

    assert asyncio.run(main()) == ("succeeded", [1, 2])


def test_waits_survive_a_server_restart(private_cluster: tuple[str, Callable[[], None]]) -> None:
    url, restart = private_cluster
    before = polls(url)
    with Client.connect(url) as c:
        runs = claimed(c, 10, tenant="restart")
    with ThreadPoolExecutor(11) as pool:
        with Client.connect(url) as waiting:
            waits = [pool.submit(waiting.wait, r, 60) for r, _ in runs]
            streamed = pool.submit(lambda: [ch.chunk for ch in waiting.stream(runs[0][0])])
            time.sleep(0.5)  # every wait is watching
            restart()
            with Client.connect(url) as worker:
                assert worker.emit(*runs[0], ["after the restart"])
                for r, e in runs:
                    assert worker.complete(r, e)
            assert [w.result(timeout=60).status for w in waits] == ["succeeded"] * 10
            assert streamed.result(timeout=60) == ["after the restart"]
    assert polls(url) == before
