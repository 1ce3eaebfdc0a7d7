"""runq.AsyncClient against a real database: every method, every mapped
exception, and each kind of source. Runs on asyncio through anyio's pytest
plugin.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

import runq
from runq import (
    AsyncClient,
    IdempotencyConflict,
    InvalidArgument,
    InvalidRunState,
    RunNotFound,
    RunqError,
    SessionBusy,
)

pytestmark = pytest.mark.anyio
MISSING = 987654321
SHORT = timedelta(milliseconds=1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(db_url: str, anyio_backend: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient.connect(db_url) as c:
        yield c


async def claim_one(client: AsyncClient, classes: list[int] | None = None,
                    **kw: Any) -> runq.ClaimedRun:
    runs = await client.claim(classes or [0, 10, 20], **kw)
    assert len(runs) == 1
    return runs[0]


async def event_types(client: AsyncClient, run_id: int) -> list[str]:
    return [e.type for e in await client.run_events(run_id)]


async def test_worker_lifecycle(client: AsyncClient) -> None:
    assert await client.claim([0]) == []
    sub = await client.submit("acme", "agent", {"q": "hi"}, session_id="s", priority=0)
    assert sub == runq.Submitted(sub.run_id, "created")
    run = sub.run_id
    c = await claim_one(client, [0], worker_id="w1", lease=timedelta(minutes=1), max_runs=3)
    assert (c.run_id, c.epoch, c.attempt, c.payload) == (run, 1, 1, {"q": "hi"})
    assert await client.heartbeat(run, c.epoch) is True
    assert await client.begin_turn(run, c.epoch) is True
    assert await client.begin_tool(run, c.epoch, "c1", "search", "read_only", {"q": 1}) is True
    assert await client.end_tool(run, c.epoch, "c1", {"hits": 2}) is True
    assert await client.checkpoint(run, c.epoch, {"step": 1}) is True
    [call] = await client.tool_calls(run)
    assert (call.call_id, call.status, call.args, call.outcome) == (
        "c1", "finished", {"q": 1}, {"hits": 2})
    [group] = await client.orphan_report(stale_after=timedelta(hours=1))
    assert (group.lease_owner, group.stale, group.did_work, group.runs) == ("w1", False, True, 1)
    [stats] = await client.queue_stats()
    assert (stats.priority, stats.running) == (0, 1)

    assert await client.ask_user(run, c.epoch, "which city?") is True
    assert (await client.get_run(run)).question == "which city?"
    assert await client.deliver_input(run, "Oslo") is True
    c2 = await claim_one(client)
    assert (c2.epoch, c2.resumed, c2.checkpoint, c2.inputs) == (2, True, {"step": 1}, ["Oslo"])
    assert await client.complete(run, c.epoch) is False  # the old epoch is fenced
    assert await client.release(run, c2.epoch) is True
    c3 = await claim_one(client)
    assert await client.complete(run, c3.epoch, {"answer": "sunny"}) is True
    done = await client.get_run(run)
    assert (done.status, done.result, done.lease_epoch) == ("succeeded", {"answer": "sunny"}, 3)
    types = await event_types(client, run)
    assert types[0] == "run.created" and types[-1] == "run.succeeded"
    assert types.count("run.fenced") == 1


async def test_fail_dead_letter_redrive_cancel_sweep(client: AsyncClient) -> None:
    assert await client.sweep() == []
    a = (await client.submit("t", "k", max_attempts=1)).run_id
    await claim_one(client, lease=SHORT)
    await asyncio.sleep(0.05)
    assert await client.sweep(max_runs=5) == [runq.SweepAction(a, "dead_lettered")]
    b = (await client.submit("t", "k")).run_id
    cb = await claim_one(client)
    assert await client.fail(b, cb.epoch, {"code": "boom"}) is True
    assert [r.run_id for r in await client.dead_letter()] == [b, a]
    assert [r.run_id for r in await client.dead_letter(max_runs=1)] == [b]
    assert await client.redrive(a, reason="retry") is True
    assert (await client.get_run(a)).status == "queued"
    assert await client.cancel(a, reason="no") == "cancelled"
    assert await client.cancel(a) == "already_terminal"
    c = (await client.submit("t", "k")).run_id
    cc = await claim_one(client)
    assert await client.cancel(c) == "cancel_requested"
    assert await client.heartbeat(c, cc.epoch) is False
    assert (await client.get_run(c)).status == "cancelled"


async def test_purge(client: AsyncClient) -> None:
    run = (await client.submit("t", "k")).run_id
    assert await client.complete(run, (await claim_one(client)).epoch) is True
    assert await client.purge(timedelta(hours=1)) == 0
    assert await client.purge(timedelta(0), max_runs=5, include_failed=False) == 1
    with pytest.raises(RunNotFound):
        await client.get_run(run)


async def test_limits_and_pauses(client: AsyncClient) -> None:
    assert await client.limits() == [] and await client.pauses() == []
    assert await client.set_limit("tenant", None, 2) is None
    assert await client.set_limit("kind", "report", 1) is None
    first = (await client.submit("acme", "report")).run_id
    await client.submit("acme", "report")
    assert [c.run_id for c in await client.claim([10], max_runs=5)] == [first]
    assert await client.limits() == [runq.Limit("kind", "report", 1, 1),
                                     runq.Limit("tenant", None, 2, None)]
    await client.set_limit("kind", "report", None)
    assert await client.limits() == [runq.Limit("tenant", None, 2, None)]
    with pytest.raises(InvalidArgument, match="bogus"):
        await client.set_limit("bogus", "x", 1)
    with pytest.raises(InvalidArgument, match="max_running"):
        await client.set_limit("tenant", "acme", 0)

    assert await client.pause("kind", "report", reason="broken") is True
    assert await client.pause("kind", "report") is False
    [pause] = await client.pauses()
    assert (pause.scope, pause.key, pause.reason) == ("kind", "report", "broken")
    assert await client.claim([10]) == []
    assert await client.resume("kind", "report") is True
    assert await client.resume("kind", "report") is False
    assert await client.pauses() == []
    assert [c.kind for c in await client.claim([10])] == ["report"]
    with pytest.raises(InvalidArgument, match="abc"):
        await client.pause("class", "abc")
    with pytest.raises(InvalidArgument, match="bogus"):
        await client.resume("bogus", "x")


async def test_usage_budget_and_deadline(client: AsyncClient) -> None:
    sub = await client.submit("acme", "agent", budget={"cost_usd": Decimal("0.3")},
                              timeout=timedelta(hours=1))
    run = sub.run_id
    got = await client.get_run(run)
    assert got.budget == {"cost_usd": Decimal("0.3")} and got.usage == {}
    assert got.deadline == got.created_at + timedelta(hours=1)
    c = await claim_one(client)
    assert (c.budget, c.deadline, c.usage) == (got.budget, got.deadline, {})
    since: datetime = got.created_at
    assert await client.record_usage(run, c.epoch, {"cost_usd": 0.1, "input_tokens": 7}) is True
    assert await client.begin_turn(run, c.epoch) is True
    assert await client.record_usage(run, c.epoch, {"cost_usd": 0.2}) is True
    usage = (await client.get_run(run)).usage
    assert usage == {"cost_usd": Decimal("0.3"), "input_tokens": 7}
    assert all(type(v) is Decimal for v in usage.values())
    assert await client.begin_turn(run, c.epoch) is False  # 0.3 >= 0.3
    failed = await client.get_run(run)
    assert failed.status == "failed" and failed.failure is not None
    assert failed.failure["code"] == "budget_exhausted"
    # After the run failed, an epoch it had still records: false, counted.
    assert await client.record_usage(run, c.epoch, {"cost_usd": 1}) is False
    assert (await client.get_run(run)).usage["cost_usd"] == Decimal("1.3")
    with pytest.raises(InvalidArgument, match="epoch"):
        await client.record_usage(run, c.epoch + 1, {"cost_usd": 1})
    assert await client.set_budget(run, {"cost_usd": 5}) is True
    assert await client.redrive(run) is True
    c2 = await claim_one(client)
    assert (c2.budget, c2.usage) == ({"cost_usd": 5}, {"cost_usd": Decimal("1.3"),
                                                        "input_tokens": 7})
    assert await client.begin_turn(run, c2.epoch) is True
    assert await client.set_budget(run, None) is True
    assert await client.complete(run, c2.epoch) is True
    assert await client.set_budget(run, {"cost_usd": 1}) is False
    assert await client.usage_report(since) == [
        runq.UsageRow("acme", "agent", 1, {"cost_usd": Decimal("1.3"), "input_tokens": 7})]
    with pytest.raises(InvalidArgument):
        await client.usage_report(since, since)


async def test_schedules(client: AsyncClient, db_url: str) -> None:
    assert await client.schedules() == [] and await client.tick() == []
    assert await client.create_schedule("ping", "acme", "ping", every=timedelta(hours=1),
                                        payload={"a": 1}, priority=20) is True
    assert await client.create_schedule("ping", "acme", "ping", every=timedelta(hours=1),
                                        payload={"a": 2}, priority=20) is False
    assert await client.create_schedule("nightly", "acme", "report", cron="0 3 * * *") is True
    nightly, ping = await client.schedules()
    assert (nightly.name, nightly.cron, nightly.every) == ("nightly", "0 3 * * *", None)
    assert (ping.name, ping.cron, ping.every) == ("ping", None, timedelta(hours=1))
    with pytest.raises(InvalidArgument, match="bogus"):
        await client.create_schedule("bad", "acme", "k", cron="bogus")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("UPDATE runq.schedule_settings SET next_slot = now() - interval '1 s',"
                           " created_at = now() - interval '1 s' - every WHERE name = 'ping'")
        [row] = await client.tick(max_runs=10)
        assert type(row) is runq.TickRow and (row.schedule, row.outcome) == ("ping", "created")
        assert row.run_id is not None
        c = await claim_one(client, [20])
        assert c.run_id == row.run_id and c.payload == {"a": 2, "slot": c.payload["slot"]}
        read = await conn.execute("SELECT %s::timestamptz", [c.payload["slot"]])
        assert await read.fetchone() == (row.slot,) and c.payload["slot"].endswith("Z")
    assert [s.last_run_id for s in await client.schedules()] == [None, row.run_id]
    assert await client.drop_schedule("ping") is True
    assert await client.drop_schedule("ping") is False
    assert [s.name for s in await client.schedules()] == ["nightly"]
    assert (await client.get_run(row.run_id)).status == "running"  # the run stays


async def test_each_mapped_exception(client: AsyncClient) -> None:
    await client.submit("t", "k", {"a": 1}, idempotency_key="key")
    with pytest.raises(IdempotencyConflict) as conflict:
        await client.submit("t", "k", {"a": 2}, idempotency_key="key")
    assert conflict.value.sqlstate == "RQ001"

    busy = (await client.submit("t", "k", session_id="s")).run_id
    with pytest.raises(SessionBusy, match=str(busy)) as session:
        await client.submit("t", "k", session_id="s")
    assert session.value.sqlstate == "RQ002"

    with pytest.raises(InvalidRunState) as state:
        await client.redrive(busy)
    assert state.value.sqlstate == "RQ004" and state.value.hint

    with pytest.raises(InvalidArgument, match="sometimes") as argument:
        await client.submit("t", "k", recovery_policy="sometimes")
    assert argument.value.sqlstate == "22023"
    assert isinstance(argument.value.__cause__, psycopg.Error)


async def test_run_not_found_everywhere(client: AsyncClient) -> None:
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: client.deliver_input(MISSING, {}),
        lambda: client.cancel(MISSING),
        lambda: client.get_run(MISSING),
        lambda: client.run_events(MISSING),
        lambda: client.heartbeat(MISSING, 1),
        lambda: client.complete(MISSING, 1, {}),
        lambda: client.fail(MISSING, 1, {"code": "x"}),
        lambda: client.release(MISSING, 1),
        lambda: client.ask_user(MISSING, 1, {}),
        lambda: client.checkpoint(MISSING, 1, {}),
        lambda: client.begin_turn(MISSING, 1),
        lambda: client.begin_tool(MISSING, 1, "c", "t", "idempotent"),
        lambda: client.end_tool(MISSING, 1, "c", {}),
        lambda: client.tool_calls(MISSING),
        lambda: client.redrive(MISSING),
        lambda: client.record_usage(MISSING, 1, {"cost_usd": 1}),
        lambda: client.set_budget(MISSING, None),
    ]
    for call in calls:
        with pytest.raises(RunNotFound, match=str(MISSING)) as info:
            await call()
        assert info.value.sqlstate == "RQ003"


async def test_conninfo_client_connects_only_when_entered(db_url: str,
                                                           anyio_backend: str) -> None:
    client = AsyncClient.connect(db_url)
    with pytest.raises(RuntimeError, match="not open"):
        await client.queue_stats()
    async with client:
        assert await client.queue_stats() == []
    AsyncClient.connect("postgresql://nobody@127.0.0.1:1/none")  # nothing connects


async def test_callers_connections(db_url: str, anyio_backend: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as auto, \
            await psycopg.AsyncConnection.connect(db_url) as manual:
        async with AsyncClient(auto) as client:
            run = (await client.submit("t", "k")).run_id
        assert not auto.closed
        other = AsyncClient(manual)
        assert (await other.get_run(run)).status == "queued"  # committed by the call
        assert manual.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        async with manual.transaction(force_rollback=True):
            mine = (await other.submit("t", "k", session_id="x")).run_id
            with pytest.raises(SessionBusy):
                await other.submit("t", "k", session_id="x")
            assert (await other.get_run(mine)).status == "queued"
        with pytest.raises(RunNotFound):
            await client.get_run(mine)


async def test_pool_source(db_url: str, anyio_backend: str) -> None:
    async with AsyncConnectionPool(db_url, min_size=1, max_size=3, open=False) as pool:
        client = AsyncClient(pool)
        runs = await asyncio.gather(*(client.submit("t", "k", session_id=f"s{i}")
                                      for i in range(6)))
        assert sorted(r.outcome for r in runs) == ["created"] * 6
        claimed = await asyncio.gather(*(client.claim([10]) for _ in range(6)))
        assert sorted(c.run_id for got in claimed for c in got) == sorted(r.run_id for r in runs)
        with pytest.raises(RunNotFound):
            await client.get_run(MISSING)


async def test_other_errors_pass_through_unchanged(db_url: str, anyio_backend: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("SET ROLE runq_client")
        client = AsyncClient(conn)
        await client.submit("t", "k")
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as info:
            await client.sweep()
        assert not isinstance(info.value, RunqError)
