"""Child runs through runq.Client and runq.AsyncClient against a real
database: spawn, wait_children and children, the ChildRun rows, get_run's
parent_run_id and queue_stats' waiting_for_children, each mapped exception.

  test_spawn_makes_a_queued_child_of_the_parent
      a child has its parent's tenant and class, no session, parent_run_id
      set; run.spawned on the parent and run.created on the child name each
      other; children() lists it as a ChildRun; the parent has no parent.
  test_spawn_passes_every_option_and_deadlines_nest
      priority, max_attempts, recovery_policy, timeout and budget reach the
      child; its deadline is the earlier of its own and its parent's.
  test_a_key_names_one_child_and_another_request_conflicts
      the same key and request again (and from a resumed epoch) is the same
      child, nothing created; another request under it is
      IdempotencyConflict, a NULL priority unlike the parent's given
      explicitly.
  test_a_fenced_spawn_is_none_and_creates_nothing
  test_wait_children_until_the_last_child_ends
      waiting_for_children in get_run, list_runs and queue_stats; the last
      child's end queues the parent (attempts reset), whose next claim is
      resumed and reads each child's result, failure and status.
  test_an_empty_wait_queues_the_run_at_once_without_resetting_attempts
  test_usage_rolls_up_and_an_ancestors_budget_stops_a_child
  test_a_parent_that_ends_cancels_its_children
  test_caps_and_bad_arguments
  test_unknown_run_and_redrive_under_a_finished_parent
  test_async_client_children
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest

import runq
from runq import (
    AsyncClient,
    ChildRun,
    Client,
    IdempotencyConflict,
    InvalidArgument,
    InvalidRunState,
    RunNotFound,
)

MISSING = 987654321


@pytest.fixture
def client(db_url: str) -> Iterator[Client]:
    with Client.connect(db_url) as c:
        yield c


def claim_one(client: Client, classes: list[int], **kw: Any) -> runq.ClaimedRun:
    runs = client.claim(classes, **kw)
    assert len(runs) == 1, runs
    return runs[0]


def running_parent(client: Client, priority: int, **submit: Any) -> runq.ClaimedRun:
    """A run submitted in a class of its own and claimed."""
    run_id = client.submit("acme", "plan", {"goal": "report"}, priority=priority,
                           **submit).run_id
    claimed = claim_one(client, [priority])
    assert claimed.run_id == run_id
    return claimed


def event_payloads(client: Client, run_id: int, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in client.run_events(run_id) if e.type == kind]


def test_spawn_makes_a_queued_child_of_the_parent(client: Client) -> None:
    parent = running_parent(client, 5, session_id="s1")
    child = client.spawn(parent.run_id, parent.epoch, "research", "research", {"topic": "a"})
    assert isinstance(child, int)
    run = client.get_run(child)
    assert (run.status, run.tenant_id, run.session_id, run.kind, run.priority) == (
        "queued", "acme", None, "research", 5)
    assert (run.parent_run_id, run.max_attempts, run.budget, run.deadline) == (
        parent.run_id, 3, None, None)
    assert client.get_run(parent.run_id).parent_run_id is None
    assert event_payloads(client, parent.run_id, "run.spawned") == [
        {"run_id": child, "key": "research"}]
    [created] = event_payloads(client, child, "run.created")
    assert created["parent_run_id"] == parent.run_id
    assert client.children(parent.run_id) == [
        ChildRun("research", child, "research", "queued", None, None, {})]
    assert client.children(child) == []
    second = client.spawn(parent.run_id, parent.epoch, "write", "write")
    assert [c.key for c in client.children(parent.run_id)] == ["research", "write"]
    assert claim_one(client, [5], max_runs=1).payload == {"topic": "a"}  # the first spawned
    assert claim_one(client, [5]).run_id == second and client.get_run(second).status == "running"


def test_spawn_passes_every_option_and_deadlines_nest(client: Client) -> None:
    parent = running_parent(client, 6, timeout=timedelta(hours=1))
    deadline = client.get_run(parent.run_id).deadline
    assert deadline is not None
    child = client.spawn(parent.run_id, parent.epoch, "k1", "research", {"n": 1}, priority=0,
                         max_attempts=5, recovery_policy="fail", timeout=timedelta(minutes=5),
                         budget={"cost_usd": Decimal("0.50")})
    assert child is not None
    run = client.get_run(child)
    assert (run.priority, run.max_attempts, run.budget) == (0, 5, {"cost_usd": Decimal("0.50")})
    assert run.deadline is not None and run.deadline < deadline
    # A timeout longer than the parent's remaining time: the parent's deadline.
    later = client.spawn(parent.run_id, parent.epoch, "k2", "research",
                         timeout=timedelta(hours=3))
    assert later is not None and client.get_run(later).deadline == deadline
    none = client.spawn(parent.run_id, parent.epoch, "k3", "research")
    assert none is not None and client.get_run(none).deadline == deadline
    [claimed] = client.claim([0])
    assert (claimed.run_id, claimed.budget) == (child, {"cost_usd": Decimal("0.50")})


def test_a_key_names_one_child_and_another_request_conflicts(client: Client) -> None:
    parent = running_parent(client, 7)
    child = client.spawn(parent.run_id, parent.epoch, "a", "research", {"n": 1})
    assert client.spawn(parent.run_id, parent.epoch, "a", "research", {"n": 1}) == child
    assert len(client.children(parent.run_id)) == 1
    assert len(event_payloads(client, parent.run_id, "run.spawned")) == 1
    with pytest.raises(IdempotencyConflict) as conflict:
        client.spawn(parent.run_id, parent.epoch, "a", "research", {"n": 2})
    assert conflict.value.sqlstate == "RQ001"
    with pytest.raises(IdempotencyConflict):
        client.spawn(parent.run_id, parent.epoch, "a", "research", {"n": 1}, priority=7)
    with pytest.raises(IdempotencyConflict):
        client.spawn(parent.run_id, parent.epoch, "a", "write", {"n": 1})
    # A resumed attempt spawns again: the same child, whatever epoch made it.
    # (The child is queued in the parent's class too: both are claimed.)
    assert client.release(parent.run_id, parent.epoch) is True
    [resumed] = [c for c in client.claim([7], max_runs=2) if c.run_id == parent.run_id]
    assert resumed.resumed is True
    assert client.spawn(parent.run_id, resumed.epoch, "a", "research", {"n": 1}) == child
    assert [c.run_id for c in client.children(parent.run_id)] == [child]


def test_a_fenced_spawn_is_none_and_creates_nothing(client: Client) -> None:
    parent = running_parent(client, 8)
    child = client.spawn(parent.run_id, parent.epoch, "a", "research", priority=29)
    assert client.release(parent.run_id, parent.epoch) is True
    again = claim_one(client, [8])
    assert client.spawn(parent.run_id, parent.epoch, "b", "research") is None
    # A known key too: fencing is decided first.
    assert client.spawn(parent.run_id, parent.epoch, "a", "research", priority=29) is None
    assert client.wait_children(parent.run_id, parent.epoch) is False
    assert [c.key for c in client.children(parent.run_id)] == ["a"]
    assert [e.epoch for e in client.run_events(parent.run_id)
            if e.type == "run.fenced"] == [parent.epoch]
    assert client.get_run(parent.run_id).status == "running"
    assert client.spawn(parent.run_id, again.epoch, "b", "research") not in (None, child)


def test_wait_children_until_the_last_child_ends(client: Client) -> None:
    parent = running_parent(client, 9, max_attempts=2)
    a = client.spawn(parent.run_id, parent.epoch, "a", "research", priority=19)
    b = client.spawn(parent.run_id, parent.epoch, "b", "research", priority=19, max_attempts=1)
    assert a is not None and b is not None
    assert client.wait_children(parent.run_id, parent.epoch) is True
    waiting = client.get_run(parent.run_id)
    assert (waiting.status, waiting.attempts) == ("waiting_for_children", 1)
    assert [r.run_id for r in client.list_runs("waiting_for_children")] == [parent.run_id]
    stats = {s.priority: s for s in client.queue_stats()}
    assert (stats[9].waiting_for_children, stats[9].waiting_for_user, stats[9].running) == (
        1, 0, 0)
    assert event_payloads(client, parent.run_id, "run.waiting_for_children") == [
        {"children": 2}]
    assert client.claim([9]) == []  # it holds no lease and is not ready
    assert client.heartbeat(parent.run_id, parent.epoch) is False

    ca, cb = client.claim([19], max_runs=2)
    assert (ca.run_id, cb.run_id) == (a, b)
    assert client.record_usage(a, ca.epoch, {"input_tokens": 10})
    assert client.complete(a, ca.epoch, {"summary": "A"}) is True
    assert client.get_run(parent.run_id).status == "waiting_for_children"
    assert client.fail(b, cb.epoch, {"code": "tool_error", "message": "no luck"}) is True
    # The last child's end queued the parent, in the same transaction.
    queued = client.get_run(parent.run_id)
    assert (queued.status, queued.attempts) == ("queued", 0)
    assert event_payloads(client, parent.run_id, "run.children_done") == [{}]
    resumed = claim_one(client, [9])
    assert (resumed.run_id, resumed.resumed, resumed.attempt) == (parent.run_id, True, 1)
    got = client.children(parent.run_id)
    assert [(c.key, c.run_id, c.kind, c.status, c.result) for c in got] == [
        ("a", a, "research", "succeeded", {"summary": "A"}),
        ("b", b, "research", "failed", None)]
    assert got[0].usage == {"input_tokens": 10} and got[0].failure is None
    assert got[1].failure is not None and got[1].failure["code"] == "tool_error"
    assert client.complete(parent.run_id, resumed.epoch, {"a": "A"}) is True


def test_an_empty_wait_queues_the_run_at_once_without_resetting_attempts(
        client: Client) -> None:
    parent = running_parent(client, 11, max_attempts=2)
    assert client.wait_children(parent.run_id, parent.epoch) is True
    run = client.get_run(parent.run_id)
    assert (run.status, run.attempts) == ("queued", 1)
    assert [t.type for t in client.run_events(parent.run_id)][-1] == "run.children_done"
    again = claim_one(client, [11])
    assert (again.resumed, again.attempt) == (True, 2)
    # Every child already terminal: the same.
    child = client.spawn(parent.run_id, again.epoch, "a", "k", priority=21)
    assert child is not None
    [c] = client.claim([21])
    assert client.complete(child, c.epoch, "done") is True
    assert client.wait_children(parent.run_id, again.epoch) is True
    assert client.get_run(parent.run_id).status == "queued"


def test_usage_rolls_up_and_an_ancestors_budget_stops_a_child(client: Client) -> None:
    parent = running_parent(client, 12, budget={"cost_usd": Decimal("1.00")})
    child = client.spawn(parent.run_id, parent.epoch, "a", "k", priority=22)
    assert child is not None
    [c] = client.claim([22])
    grandchild = client.spawn(child, c.epoch, "g", "k", priority=23)
    assert grandchild is not None and client.get_run(grandchild).parent_run_id == child
    [g] = client.claim([23])
    assert client.record_usage(child, c.epoch, {"cost_usd": Decimal("0.1")})
    assert client.record_usage(grandchild, g.epoch, {"cost_usd": Decimal("0.2")})
    assert client.record_usage(parent.run_id, parent.epoch, {"cost_usd": Decimal("0.3")})
    assert client.get_run(parent.run_id).usage == {"cost_usd": Decimal("0.6")}
    assert client.get_run(child).usage == {"cost_usd": Decimal("0.3")}
    [row] = client.children(parent.run_id)
    assert row.usage == {"cost_usd": Decimal("0.3")}  # the child's, its grandchild's included
    assert client.begin_turn(grandchild, g.epoch) is True
    assert client.record_usage(grandchild, g.epoch, {"cost_usd": Decimal("0.4")})
    # The parent's total is 1.0 now: its budget stops the grandchild's next turn.
    assert client.begin_turn(grandchild, g.epoch) is False
    stopped = client.get_run(grandchild)
    assert stopped.status == "failed" and stopped.failure is not None
    assert (stopped.failure["code"], stopped.failure["run_id"]) == (
        "budget_exhausted", parent.run_id)


def test_a_parent_that_ends_cancels_its_children(client: Client) -> None:
    parent = running_parent(client, 13)
    queued = client.spawn(parent.run_id, parent.epoch, "q", "k", priority=24)
    running = client.spawn(parent.run_id, parent.epoch, "r", "k", priority=25)
    assert queued is not None and running is not None
    [r] = client.claim([25])
    below = client.spawn(running, r.epoch, "b", "k", priority=24)
    assert below is not None
    assert client.fail(parent.run_id, parent.epoch, {"code": "gave_up"}) is True
    assert client.get_run(queued).status == "cancelled"
    assert event_payloads(client, queued, "run.cancelled")[0]["reason"] == "parent_finished"
    busy = client.get_run(running)
    assert (busy.status, busy.cancel_requested) == ("running", True)
    assert event_payloads(client, running, "run.cancel_requested")[0]["reason"] == \
        "parent_finished"
    assert client.heartbeat(running, r.epoch) is False  # it ends at its next call
    assert client.get_run(running).status == "cancelled"
    assert client.get_run(below).status == "cancelled"  # and its own children follow
    assert [c.status for c in client.children(parent.run_id)] == ["cancelled", "cancelled"]


def test_caps_and_bad_arguments(client: Client, conn: psycopg.Connection[Any]) -> None:
    parent = running_parent(client, 14)
    bad: dict[str, Any]
    for bad in ({"key": ""}, {"key": "k" * 257}, {"kind": ""}, {"priority": 40000},
                {"max_attempts": 0}, {"recovery_policy": "sometimes"},
                {"timeout": timedelta(0)}, {"budget": {}}):
        args: dict[str, Any] = {"key": "ok", "kind": "k", **bad}
        key, kind = args.pop("key"), args.pop("kind")
        with pytest.raises(InvalidArgument):
            client.spawn(parent.run_id, parent.epoch, key, kind, **args)
    not_an_object: Any = ["a", "list"]
    with pytest.raises(InvalidArgument):
        client.spawn(parent.run_id, parent.epoch, "ok", "k", not_an_object)
    assert client.children(parent.run_id) == []
    conn.execute("UPDATE runq.settings SET max_child_depth = 1, max_children = 2")
    child = client.spawn(parent.run_id, parent.epoch, "a", "k", priority=26)
    assert child is not None
    assert client.spawn(parent.run_id, parent.epoch, "b", "k", priority=26) is not None
    with pytest.raises(InvalidArgument):  # a third key
        client.spawn(parent.run_id, parent.epoch, "c", "k", priority=26)
    assert client.spawn(parent.run_id, parent.epoch, "a", "k", priority=26) == child  # known
    c = claim_one(client, [26], max_runs=1)
    assert c.run_id == child
    with pytest.raises(InvalidArgument):  # a grandchild is at depth 2
        client.spawn(child, c.epoch, "g", "k")
    assert len(client.children(parent.run_id)) == 2 and client.children(child) == []


def test_unknown_run_and_redrive_under_a_finished_parent(client: Client) -> None:
    for call in (lambda: client.spawn(MISSING, 1, "a", "k"),
                 lambda: client.wait_children(MISSING, 1),
                 lambda: client.children(MISSING)):
        with pytest.raises(RunNotFound, match=str(MISSING)):
            call()
    parent = running_parent(client, 15)
    child = client.spawn(parent.run_id, parent.epoch, "a", "k", priority=27, max_attempts=1)
    assert child is not None
    [c] = client.claim([27])
    assert client.fail(child, c.epoch, {"code": "boom"}) is True
    assert client.redrive(child) is True  # its parent is still running
    [c] = client.claim([27])
    assert client.fail(child, c.epoch, {"code": "boom"}) is True
    assert client.complete(parent.run_id, parent.epoch, None) is True
    with pytest.raises(InvalidRunState, match=str(parent.run_id)):
        client.redrive(child)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def aclient(db_url: str, anyio_backend: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient.connect(db_url) as c:
        yield c


@pytest.mark.anyio
async def test_async_client_children(aclient: AsyncClient) -> None:
    run_id = (await aclient.submit("acme", "plan", priority=16)).run_id
    [parent] = await aclient.claim([16])
    child = await aclient.spawn(run_id, parent.epoch, "a", "k", {"n": 1}, priority=28)
    assert child is not None
    assert await aclient.spawn(run_id, parent.epoch, "a", "k", {"n": 1}, priority=28) == child
    assert await aclient.wait_children(run_id, parent.epoch) is True
    assert (await aclient.get_run(run_id)).status == "waiting_for_children"
    [c] = await aclient.claim([28])
    assert await aclient.complete(child, c.epoch, {"ok": True}) is True
    assert await aclient.children(run_id) == [
        ChildRun("a", child, "k", "succeeded", {"ok": True}, None, {})]
    [stats] = [s for s in await aclient.queue_stats() if s.priority == 16]
    assert (stats.ready, stats.waiting_for_children) == (1, 0)
    with pytest.raises(RunNotFound):
        await aclient.children(MISSING)
