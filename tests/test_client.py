"""runq.Client against a real database: every method, every mapped exception,
and each kind of source (conninfo, caller's connection, pool).

Fixtures (conftest.py): db_url is a fresh database with runq deployed, conn an
autocommit superuser connection to it, connect a factory for more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool

import runq
from runq import (
    Client,
    IdempotencyConflict,
    InvalidArgument,
    InvalidRunState,
    RunNotFound,
    RunqError,
    SessionBusy,
)
from runq.client import json_text
from runq.errors import from_psycopg

Connect = Callable[[], psycopg.Connection[Any]]
MISSING = 987654321  # a run id no test creates
SHORT = timedelta(milliseconds=1)  # a lease that has expired by the next statement


@pytest.fixture
def client(db_url: str) -> Iterator[Client]:
    with Client.connect(db_url) as c:
        yield c


def event_types(client: Client, run_id: int) -> list[str]:
    return [e.type for e in client.run_events(run_id)]


def claim_one(client: Client, classes: list[int] | None = None, **kw: Any) -> runq.ClaimedRun:
    runs = client.claim(classes or [0, 10, 20], **kw)
    assert len(runs) == 1
    return runs[0]


# -- submit ---------------------------------------------------------------------


def test_submit_sends_only_given_arguments_so_sql_defaults_apply(client: Client) -> None:
    sub = client.submit("acme", "chat.turn")
    assert sub == runq.Submitted(run_id=sub.run_id, outcome="created")
    run = client.get_run(sub.run_id)
    assert (run.tenant_id, run.kind, run.session_id) == ("acme", "chat.turn", None)
    assert (run.status, run.priority, run.max_attempts, run.attempts) == ("queued", 10, 3, 0)
    assert run.scheduled_for is None and run.lease_epoch == 0
    assert claim_one(client).payload == {}


def test_submit_passes_every_argument(client: Client) -> None:
    when = datetime.now(timezone.utc) + timedelta(hours=1)
    sub = client.submit(
        "acme", "report", {"n": 1}, session_id="s1", priority=20, idempotency_key="k1",
        principal_id="alice", scheduled_for=when, max_attempts=5, recovery_policy="fail",
        queue_ttl=timedelta(days=2))
    run = client.get_run(sub.run_id)
    assert (run.session_id, run.priority, run.max_attempts) == ("s1", 20, 5)
    assert run.scheduled_for == when
    assert client.claim([20]) == []  # scheduled an hour from now
    stats = {s.priority: s for s in client.queue_stats()}
    assert stats[20].scheduled == 1 and stats[20].ready == 0


def test_submit_idempotency_duplicate_and_conflict(client: Client) -> None:
    first = client.submit("acme", "k", {"a": 1}, idempotency_key="key", principal_id="p")
    again = client.submit("acme", "k", {"a": 1}, idempotency_key="key", principal_id="p")
    assert again == runq.Submitted(first.run_id, "duplicate")
    with pytest.raises(IdempotencyConflict) as info:
        client.submit("acme", "k", {"a": 2}, idempotency_key="key", principal_id="p")
    err = info.value
    assert err.sqlstate == "RQ001" and isinstance(err, RunqError)
    assert "key" in str(err) and str(err) == err.message
    assert isinstance(err.__cause__, psycopg.Error) and err.__cause__.sqlstate == "RQ001"


def test_submit_session_busy_names_the_active_run(client: Client) -> None:
    first = client.submit("acme", "k", session_id="s1")
    with pytest.raises(SessionBusy) as info:
        client.submit("acme", "k", session_id="s1")
    assert info.value.sqlstate == "RQ002"
    assert str(first.run_id) in str(info.value)
    assert info.value.detail is not None or info.value.hint is not None


def test_invalid_argument_keeps_the_servers_message(client: Client) -> None:
    with pytest.raises(InvalidArgument) as info:
        client.submit("acme", "k", recovery_policy="sometimes")
    assert info.value.sqlstate == "22023" and "sometimes" in str(info.value)
    with pytest.raises(InvalidArgument):
        client.submit("acme", "k", priority=40000)
    with pytest.raises(InvalidArgument):
        client.claim([])
    with pytest.raises(InvalidArgument):
        client.claim([0], lease=timedelta(0))
    with pytest.raises(InvalidArgument):
        client.sweep(max_runs=0)


def test_required_none_is_sql_null_and_rejected(client: Client) -> None:
    run = client.submit("acme", "k").run_id
    c = claim_one(client)
    calls: list[Callable[[], bool]] = [
        lambda: client.checkpoint(run, c.epoch, None),
        lambda: client.ask_user(run, c.epoch, None),
        lambda: client.end_tool(run, c.epoch, "x", None),
        lambda: client.fail(run, c.epoch, None),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidArgument):
            call()
    assert client.heartbeat(run, c.epoch) is True


def test_run_not_found_from_every_function_taking_a_run(client: Client) -> None:
    calls: dict[str, Callable[[], object]] = {
        "deliver_input": lambda: client.deliver_input(MISSING, {"a": 1}),
        "cancel": lambda: client.cancel(MISSING),
        "get_run": lambda: client.get_run(MISSING),
        "run_events": lambda: client.run_events(MISSING),
        "heartbeat": lambda: client.heartbeat(MISSING, 1),
        "complete": lambda: client.complete(MISSING, 1),
        "fail": lambda: client.fail(MISSING, 1, {"code": "x"}),
        "release": lambda: client.release(MISSING, 1),
        "ask_user": lambda: client.ask_user(MISSING, 1, "?"),
        "checkpoint": lambda: client.checkpoint(MISSING, 1, {}),
        "begin_turn": lambda: client.begin_turn(MISSING, 1),
        "begin_tool": lambda: client.begin_tool(MISSING, 1, "c", "t", "read_only"),
        "end_tool": lambda: client.end_tool(MISSING, 1, "c", {}),
        "tool_calls": lambda: client.tool_calls(MISSING),
        "redrive": lambda: client.redrive(MISSING),
        "record_usage": lambda: client.record_usage(MISSING, 1, {"cost_usd": 1}),
        "set_budget": lambda: client.set_budget(MISSING, {"cost_usd": 1}),
    }
    for name, call in calls.items():
        with pytest.raises(RunNotFound, match=str(MISSING)) as info:
            call()
        assert info.value.sqlstate == "RQ003", name


# -- the worker's side ----------------------------------------------------------


def test_claim_returns_every_column_and_empty_when_nothing_is_ready(client: Client) -> None:
    assert client.claim([0, 10]) == []
    sub = client.submit("acme", "chat", {"q": "hi"}, session_id="s", priority=0)
    before = datetime.now(timezone.utc)
    c = claim_one(client, [0], worker_id="w1", lease=timedelta(minutes=2))
    assert (c.run_id, c.epoch, c.attempt, c.resumed) == (sub.run_id, 1, 1, False)
    assert (c.tenant_id, c.session_id, c.kind, c.priority) == ("acme", "s", "chat", 0)
    assert c.payload == {"q": "hi"} and c.checkpoint is None and c.inputs == []
    assert timedelta(seconds=100) < c.lease_expires_at - before < timedelta(seconds=140)
    assert client.claim((0, 10)) == []  # any sequence of classes


def test_claim_max_runs_and_priority_order(client: Client) -> None:
    ids = [client.submit("t", "k", priority=p).run_id for p in (20, 10, 0)]
    got = client.claim([0, 10, 20], max_runs=2)
    assert [c.run_id for c in got] == [ids[2], ids[1]]
    assert [c.run_id for c in client.claim([0, 10, 20], max_runs=5)] == [ids[0]]


def test_heartbeat_checkpoint_turn_tools_complete(client: Client) -> None:
    run = client.submit("t", "agent").run_id
    c = claim_one(client)
    assert client.heartbeat(run, c.epoch) is True
    assert client.begin_turn(run, c.epoch) is True
    assert client.begin_tool(run, c.epoch, "c1", "search", "read_only", {"q": "x"}) is True
    assert client.begin_tool(run, c.epoch, "c2", "mail", "non_idempotent") is True
    assert client.end_tool(run, c.epoch, "c1", {"hits": 3}) is True
    assert client.checkpoint(run, c.epoch, {"step": 2}) is True
    calls = {t.call_id: t for t in client.tool_calls(run)}
    assert calls["c1"].status == "finished" and calls["c1"].outcome == {"hits": 3}
    assert calls["c1"].args == {"q": "x"} and calls["c1"].finished_at is not None
    assert calls["c2"].args == {} and calls["c2"].status == "started"
    assert calls["c2"].idempotency == "non_idempotent" and calls["c2"].epoch == c.epoch
    with pytest.raises(InvalidArgument):
        client.end_tool(run, c.epoch, "never-began", {})
    assert client.complete(run, c.epoch, {"answer": 42}) is True
    done = client.get_run(run)
    assert done.status == "succeeded" and done.result == {"answer": 42}
    assert done.finished_at is not None
    assert event_types(client, run) == [
        "run.created", "run.claimed", "run.turn_started", "run.tool_started",
        "run.tool_started", "run.tool_finished", "run.checkpointed", "run.succeeded"]
    events = client.run_events(run)
    assert [e.event_id for e in events] == sorted(e.event_id for e in events)
    assert events[0].epoch == 0 and events[1].epoch == 1


def test_complete_and_claim_one_call_a_cycle(client: Client) -> None:
    ids = [client.submit("t", "k", priority=3).run_id for _ in range(3)]
    first = client.complete_and_claim(None, None, None, [3], worker_id="w")
    assert first.completed is None and [c.run_id for c in first.runs] == ids[:1]
    budget = client.submit("t", "k", priority=3, budget={"cost_usd": Decimal("0.10")}).run_id
    got = client.complete_and_claim(ids[0], 1, {"n": 1}, [3], worker_id="w", max_runs=5,
                                    lease=timedelta(minutes=5))
    assert got.completed is True and [c.run_id for c in got.runs] == [*ids[1:], budget]
    assert got.runs[-1].budget == {"cost_usd": Decimal("0.10")}  # exact, as claim gives it
    assert client.get_run(ids[0]).result == {"n": 1}
    empty = client.complete_and_claim(ids[1], 1, None, [3])
    assert empty == runq.CompletedAndClaimed(True, [])
    assert client.release(ids[2], 1) is True
    client.submit("t", "k", priority=3)
    fenced = client.complete_and_claim(ids[2], 1, None, [3])
    assert fenced == runq.CompletedAndClaimed(False, [])  # fenced: nothing claimed
    again = client.complete_and_claim(ids[2], 1, None, [3], claim_if_fenced=True)
    assert again.completed is False and [c.run_id for c in again.runs] == [ids[2]]
    with pytest.raises(InvalidArgument, match="max_runs"):
        client.complete_and_claim(budget, 1, None, [3], max_runs=0)
    assert client.get_run(budget).status == "running"  # the error changed nothing


def test_complete_without_result_stores_null(client: Client) -> None:
    run = client.submit("t", "k").run_id
    c = claim_one(client)
    assert client.complete(run, c.epoch) is True
    assert client.get_run(run).result is None


def test_release_then_fenced_writes_return_false(client: Client) -> None:
    run = client.submit("t", "k").run_id
    old = claim_one(client)
    assert client.checkpoint(run, old.epoch, {"at": 1}) is True
    assert client.release(run, old.epoch) is True
    new = claim_one(client)
    assert (new.run_id, new.epoch, new.attempt, new.resumed) == (run, 2, 1, True)
    assert new.checkpoint == {"at": 1}
    writes: list[Callable[[], bool]] = [
        lambda: client.heartbeat(run, old.epoch),
        lambda: client.complete(run, old.epoch, {"late": True}),
        lambda: client.fail(run, old.epoch, {"code": "late"}),
        lambda: client.checkpoint(run, old.epoch, {}),
        lambda: client.begin_turn(run, old.epoch),
        lambda: client.begin_tool(run, old.epoch, "c", "t", "idempotent"),
        lambda: client.ask_user(run, old.epoch, "?"),
        lambda: client.release(run, old.epoch),
    ]
    for write in writes:
        assert write() is False
    assert client.get_run(run).status == "running"
    assert event_types(client, run).count("run.fenced") == 1


def test_ask_user_deliver_input_and_submit_into_a_waiting_session(client: Client) -> None:
    run = client.submit("t", "chat", session_id="s").run_id
    c = claim_one(client)
    assert client.ask_user(run, c.epoch, {"text": "which city?"}) is True
    waiting = client.get_run(run)
    assert waiting.status == "waiting_for_user" and waiting.question == {"text": "which city?"}
    assert client.deliver_input(run, {"text": "Oslo"}) is True
    with pytest.raises(InvalidRunState) as state:
        client.deliver_input(run, {"text": "again"})
    assert state.value.sqlstate == "RQ004"
    again = claim_one(client)
    assert again.inputs == [{"text": "Oslo"}]
    assert client.ask_user(run, again.epoch, "and when?") is True
    sub = client.submit("t", "chat", {"text": "tomorrow"}, session_id="s")
    assert sub == runq.Submitted(run, "input_delivered")
    assert claim_one(client).inputs[-1] == {"text": "tomorrow"}


def test_fail_dead_letter_and_redrive(client: Client) -> None:
    a = client.submit("t", "k", session_id="s").run_id
    b = client.submit("t", "k").run_id
    ca = claim_one(client)
    cb = claim_one(client)
    assert client.fail(a, ca.epoch, {"code": "boom"}) is True
    assert client.fail(b, cb.epoch, {"code": "bang", "message": "it went bang"}) is True
    failed = client.get_run(a)
    assert failed.status == "failed" and failed.failure is not None
    assert (failed.failure["code"], failed.failure["message"]) == ("boom", "boom")
    assert [r.run_id for r in client.dead_letter()] == [b, a]
    assert [r.run_id for r in client.dead_letter(1)] == [b]
    assert client.queue_stats()[0].failed == 2
    with pytest.raises(InvalidRunState):
        client.redrive(client.submit("t", "k").run_id)
    client.submit("t", "k", session_id="s")  # the session is busy again
    with pytest.raises(SessionBusy):
        client.redrive(a)
    assert client.redrive(b, reason="fixed") is True
    redriven = client.get_run(b)
    assert redriven.status == "queued" and redriven.attempts == 0
    last = client.run_events(b)[-1]
    assert last.type == "run.redriven" and last.payload["reason"] == "fixed"


def test_purge_deletes_old_finished_runs_and_keeps_the_dead_letter(client: Client) -> None:
    done = client.submit("t", "k", idempotency_key="once").run_id
    assert client.complete(done, claim_one(client).epoch) is True
    failed = client.submit("t", "k").run_id
    assert client.fail(failed, claim_one(client).epoch, {"code": "boom"}) is True
    queued = client.submit("t", "k").run_id
    assert client.purge(timedelta(days=1)) == 0          # nothing is that old
    assert client.purge(timedelta(0)) == 1               # the succeeded run only
    with pytest.raises(RunNotFound):
        client.get_run(done)
    assert client.run_events(failed) and client.get_run(queued).status == "queued"
    assert client.purge(timedelta(0), max_runs=10, include_failed=True) == 1
    with pytest.raises(RunNotFound):
        client.get_run(failed)
    # The key went with its run: the same request is a new run now.
    assert client.submit("t", "k", idempotency_key="once").outcome == "created"
    with pytest.raises(InvalidArgument, match="max_runs"):
        client.purge(timedelta(0), max_runs=0)


def test_cancel_queued_running_and_terminal(client: Client) -> None:
    queued = client.submit("t", "k").run_id
    assert client.cancel(queued, reason="not needed") == "cancelled"
    assert client.cancel(queued) == "already_terminal"
    running = client.submit("t", "k").run_id
    c = claim_one(client)
    assert client.cancel(running) == "cancel_requested"
    assert client.get_run(running).cancel_requested is True
    assert client.heartbeat(running, c.epoch) is False
    assert client.get_run(running).status == "cancelled"
    assert event_types(client, running)[-1] == "run.cancelled"


# -- the operator's side ----------------------------------------------------------


def test_sweep_requeues_and_dead_letters_expired_leases(client: Client) -> None:
    assert client.sweep() == []
    again = client.submit("t", "k", max_attempts=3).run_id
    dead = client.submit("t", "k", max_attempts=1).run_id
    claim_one(client, lease=SHORT)
    claim_one(client, lease=SHORT)
    time.sleep(0.05)
    actions = client.sweep(max_runs=10)
    assert sorted(actions, key=lambda a: a.run_id) == [
        runq.SweepAction(again, "requeued"), runq.SweepAction(dead, "dead_lettered")]
    assert client.get_run(dead).failure["code"] == "max_attempts_exceeded"  # type: ignore[index]


def test_orphan_report_and_queue_stats(client: Client) -> None:
    assert client.orphan_report() == []
    assert client.queue_stats() == []
    run = client.submit("t", "k", priority=0).run_id
    client.submit("t", "k", priority=20)
    c = claim_one(client, [0], worker_id="w1")
    client.begin_turn(run, c.epoch)
    [group] = client.orphan_report()
    assert (group.lease_owner, group.stale, group.did_work, group.runs) == ("w1", False, True, 1)
    assert group.oldest_heartbeat_at is not None
    time.sleep(0.01)
    [stale] = client.orphan_report(stale_after=timedelta(milliseconds=1))
    assert stale.stale is True
    stats = client.queue_stats()
    assert [s.priority for s in stats] == [0, 20]
    assert (stats[0].running, stats[1].ready) == (1, 1)
    assert stats[1].oldest_ready_age is not None and stats[0].oldest_ready_age is None


# -- limits and pauses ---------------------------------------------------------------


def test_set_limit_and_limits_round_trip(client: Client) -> None:
    assert client.limits() == []
    assert client.set_limit("tenant", None, 2) is None
    assert client.set_limit("tenant", "acme", 10) is None
    assert client.set_limit("kind", "report", 1) is None
    first = client.submit("acme", "report").run_id
    client.submit("acme", "report")
    # The kind's limit holds from the client too: one of the two is claimed.
    assert [c.run_id for c in client.claim([10], max_runs=5)] == [first]
    assert client.limits() == [
        runq.Limit("kind", "report", 1, 1),
        runq.Limit("tenant", None, 2, None),     # the default row: no count of its own
        runq.Limit("tenant", "acme", 10, 1)]
    client.set_limit("tenant", "acme", 3)        # a second call replaces the row
    client.set_limit("kind", "report", None)     # None removes it ...
    client.set_limit("kind", "report", None)     # ... and removing an absent row is a no-op
    client.set_limit("tenant", None, None)
    assert client.limits() == [runq.Limit("tenant", "acme", 3, 1)]
    assert [c.kind for c in client.claim([10])] == ["report"]  # the kind limit is gone


def test_set_limit_bad_input_names_the_value_and_changes_nothing(client: Client) -> None:
    client.set_limit("tenant", "acme", 4)
    bad: list[tuple[Callable[[], None], tuple[str, ...]]] = [
        (lambda: client.set_limit("bogus", "acme", 2), ("scope", "bogus")),
        (lambda: client.set_limit("class", "10", 2), ("scope", "class")),  # pause's, not a limit's
        (lambda: client.set_limit("tenant", "acme", 0), ("max_running", "0")),
        (lambda: client.set_limit("tenant", None, -3), ("max_running", "-3")),
        (lambda: client.set_limit(None, "acme", 2), ("scope", "NULL")),  # type: ignore[arg-type]
    ]
    for call, names in bad:
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.sqlstate == "22023"
        for name in names:
            assert name in str(info.value), (names, str(info.value))
    assert client.limits() == [runq.Limit("tenant", "acme", 4, 0)]


def test_pause_resume_and_pauses_round_trip(client: Client,
                                            conn: psycopg.Connection[Any]) -> None:
    assert client.pauses() == []
    before = datetime.now(timezone.utc)
    assert client.pause("class", "10", reason="deploy") is True
    assert client.pause("class", "10", reason="again") is False  # paused already: kept as it was
    assert client.pause("tenant", "acme") is True
    assert client.pause("schedule", "nightly") is True  # recorded, nothing to stop yet
    pauses = client.pauses()
    assert [(p.scope, p.key, p.reason) for p in pauses] == [
        ("class", "10", "deploy"), ("schedule", "nightly", None), ("tenant", "acme", None)]
    assert all(before <= p.paused_at <= datetime.now(timezone.utc) for p in pauses)
    held = client.submit("other", "k").run_id            # class 10: paused
    acme = client.submit("acme", "k", priority=0).run_id  # class 0, but tenant acme is paused
    free = client.submit("other", "k", priority=0).run_id
    assert [c.run_id for c in client.claim([0, 10], max_runs=5)] == [free]
    conn.execute("LISTEN runq")
    assert client.resume("class", "10") is True
    assert [n.channel for n in conn.notifies(timeout=10, stop_after=1)] == ["runq"]
    assert client.resume("class", "10") is False
    assert [c.run_id for c in client.claim([0, 10], max_runs=5)] == [held]
    assert client.resume("tenant", "acme") is True
    assert [c.run_id for c in client.claim([0, 10], max_runs=5)] == [acme]
    assert client.pauses() == [runq.Pause("schedule", "nightly", None, pauses[1].paused_at)]


def test_pause_bad_input_names_the_value_and_changes_nothing(client: Client) -> None:
    client.pause("kind", "report")
    bad: list[tuple[Callable[[], bool], tuple[str, ...]]] = [
        (lambda: client.pause("bogus", "x"), ("scope", "bogus")),
        (lambda: client.pause("class", "abc"), ("abc",)),
        (lambda: client.pause("class", "32768"), ("32768",)),
        (lambda: client.pause("class", "-1"), ("-1",)),
        (lambda: client.pause("tenant", None), ("key", "NULL")),  # type: ignore[arg-type]
        (lambda: client.resume("bogus", "x"), ("scope", "bogus")),
        (lambda: client.resume("kind", None), ("key", "NULL")),  # type: ignore[arg-type]
    ]
    for call, names in bad:
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.sqlstate == "22023"
        for name in names:
            assert name in str(info.value), (names, str(info.value))
    assert [(p.scope, p.key) for p in client.pauses()] == [("kind", "report")]


def test_resume_checks_a_class_key_as_pause_does(client: Client) -> None:
    # A key that pause refuses is refused by resume too, naming it, rather
    # than answered "not paused".
    for key in ("abc", "32768", "-1"):
        with pytest.raises(InvalidArgument, match=key):
            client.resume("class", key)


def test_a_class_is_one_key_however_it_is_spelled(client: Client) -> None:
    # '010' is class 10: either refused, or the same pause as '10' (one row,
    # and the class's later runs held back by it too).
    try:
        paused = client.pause("class", "010")
    except InvalidArgument as error:
        assert "010" in str(error)
        return
    assert paused is True
    assert client.pause("class", "10") is False
    assert [(p.scope, p.key) for p in client.pauses()] == [("class", "10")]
    client.submit("t", "k", priority=10)
    assert client.claim([10]) == []
    assert client.resume("class", "10") is True and client.pauses() == []


# -- cost and time: usage, budgets, deadlines -------------------------------------------


def db_now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def test_a_run_without_budget_or_timeout_has_none_and_no_usage(client: Client) -> None:
    run = client.submit("acme", "k").run_id
    got = client.get_run(run)
    assert (got.usage, got.budget, got.deadline) == ({}, None, None)
    c = claim_one(client)
    assert (c.usage, c.budget, c.deadline) == ({}, None, None)


def test_submit_budget_and_timeout_show_on_get_run_and_on_the_claim(client: Client) -> None:
    sub = client.submit("acme", "agent", budget={"cost_usd": Decimal("2.00"),
                                                 "input_tokens": 10_000},
                        timeout=timedelta(minutes=5))
    run = client.get_run(sub.run_id)
    assert run.budget == {"cost_usd": Decimal("2.00"), "input_tokens": 10_000}
    assert run.budget is not None and all(type(v) is Decimal for v in run.budget.values())
    assert str(run.budget["cost_usd"]) == "2.00"  # as given, digit for digit
    assert run.deadline == run.created_at + timedelta(minutes=5)
    assert run.usage == {}
    c = claim_one(client)
    assert (c.budget, c.deadline, c.usage) == (run.budget, run.deadline, {})
    # Both are part of the request: the same key with another budget is another request.
    first = client.submit("acme", "k", idempotency_key="b", budget={"cost_usd": 1})
    assert client.submit("acme", "k", idempotency_key="b",
                         budget={"cost_usd": 1}).outcome == "duplicate"
    with pytest.raises(IdempotencyConflict):
        client.submit("acme", "k", idempotency_key="b", budget={"cost_usd": 2})
    with pytest.raises(IdempotencyConflict):
        client.submit("acme", "k", idempotency_key="b", budget={"cost_usd": 1},
                      timeout=timedelta(hours=1))
    assert client.get_run(first.run_id).deadline is None


def test_submit_refuses_a_bad_budget_or_timeout_naming_it(client: Client) -> None:
    for budget in ({}, {"cost_usd": -1}, {"cost_usd": "1"}):
        with pytest.raises(InvalidArgument, match="budget") as info:
            client.submit("acme", "k", budget=budget)  # type: ignore[arg-type]
        assert json.dumps(budget).replace(" ", "") in str(info.value).replace(" ", "")
    for timeout in (timedelta(0), timedelta(seconds=-1)):
        with pytest.raises(InvalidArgument, match="timeout"):
            client.submit("acme", "k", timeout=timeout)
    assert client.queue_stats() == []


def test_record_usage_sums_exactly_and_logs_each_call(client: Client) -> None:
    assert 0.1 + 0.2 != 0.3  # why usage is read as Decimal
    run = client.submit("acme", "agent").run_id
    c = claim_one(client)
    assert client.record_usage(run, c.epoch, {"cost_usd": 0.1, "input_tokens": 1200}) is True
    assert client.record_usage(run, c.epoch, {"cost_usd": 0.2, "output_tokens": 310}) is True
    assert client.record_usage(run, c.epoch, {"cost_usd": Decimal("0.0000001")}) is True
    usage = client.get_run(run).usage
    assert usage == {"cost_usd": Decimal("0.3000001"), "input_tokens": 1200,
                     "output_tokens": 310}
    assert all(type(v) is Decimal for v in usage.values())
    assert client.get_run(run).usage["cost_usd"] - Decimal("0.0000001") == Decimal("0.3")
    used = [e for e in client.run_events(run) if e.type == "run.usage"]
    assert [(e.epoch, e.payload) for e in used] == [
        (1, {"cost_usd": 0.1, "input_tokens": 1200}), (1, {"cost_usd": 0.2, "output_tokens": 310}),
        (1, {"cost_usd": 1e-07})]
    # Recording is no transition: the run goes on, and a later claim sees the totals.
    assert client.get_run(run).status == "running"
    assert client.release(run, c.epoch) is True
    assert claim_one(client).usage == usage


def test_exact_usage_of_0_1_plus_0_2(client: Client) -> None:
    run = client.submit("acme", "agent").run_id
    c = claim_one(client)
    client.record_usage(run, c.epoch, {"cost_usd": 0.1})
    client.record_usage(run, c.epoch, {"cost_usd": 0.2})
    assert client.get_run(run).usage["cost_usd"] == Decimal("0.3")
    assert json_text(client.get_run(run).usage) == '{"cost_usd": 0.3}'


def test_record_usage_from_a_fenced_epoch_is_recorded_and_answers_false(
        client: Client) -> None:
    run = client.submit("acme", "agent").run_id
    old = claim_one(client)
    assert client.release(run, old.epoch) is True
    new = claim_one(client)
    assert new.epoch == old.epoch + 1
    assert client.record_usage(run, old.epoch, {"cost_usd": 1}) is False  # fenced: recorded
    assert client.record_usage(run, old.epoch, {"cost_usd": 2}) is False
    assert client.record_usage(run, new.epoch, {"cost_usd": Decimal("0.5")}) is True
    assert client.get_run(run).usage == {"cost_usd": Decimal("3.5")}
    assert event_types(client, run).count("run.fenced") == 1  # one per run and stale epoch
    assert client.complete(run, new.epoch) is True
    # After the run finished, for an epoch it had: recorded, false.
    assert client.record_usage(run, new.epoch, {"cost_usd": Decimal("0.5")}) is False
    assert client.get_run(run).usage == {"cost_usd": Decimal("4.0")}
    assert [(e.epoch, e.payload["cost_usd"]) for e in client.run_events(run)
            if e.type == "run.usage"] == [(1, 1), (1, 2), (2, 0.5), (2, 0.5)]


def test_record_usage_refuses_bad_usage_and_epochs_the_run_never_had(client: Client) -> None:
    never = client.submit("acme", "k", priority=20).run_id
    run = client.submit("acme", "k").run_id
    assert claim_one(client, [10]).run_id == run
    with pytest.raises(InvalidArgument, match="epoch"):
        client.record_usage(never, 1, {"cost_usd": 1})  # never claimed: no epoch is valid
    for epoch in (0, -1, 2):
        with pytest.raises(InvalidArgument, match=f"got {epoch}"):
            client.record_usage(run, epoch, {"cost_usd": 1})
    for usage in ({}, {"cost_usd": -1}, {"cost_usd": "1"}, {"cost_usd": None}, [1]):
        with pytest.raises(InvalidArgument, match="usage"):
            client.record_usage(run, 1, usage)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        client.record_usage(run, None, {"cost_usd": 1})  # type: ignore[arg-type]
    with pytest.raises(RunNotFound, match=str(MISSING)):
        client.record_usage(MISSING, 1, {"cost_usd": 1})
    assert client.get_run(run).usage == {} and client.get_run(never).usage == {}


def test_begin_turn_stops_the_run_once_a_total_reaches_its_budget(client: Client) -> None:
    run = client.submit("acme", "agent", budget={"cost_usd": Decimal("0.3"),
                                                 "input_tokens": 5000}).run_id
    c = claim_one(client)
    assert client.begin_turn(run, c.epoch) is True
    client.record_usage(run, c.epoch, {"cost_usd": 0.1, "input_tokens": 100})
    assert client.begin_turn(run, c.epoch) is True
    client.record_usage(run, c.epoch, {"cost_usd": 0.2})  # 0.3: reached (>=), not passed
    assert client.heartbeat(run, c.epoch) is True        # only begin_turn is gated
    assert client.checkpoint(run, c.epoch, {"at": 2}) is True
    assert client.begin_turn(run, c.epoch) is False
    failed = client.get_run(run)
    assert failed.status == "failed" and failed.failure is not None
    assert (failed.failure["code"], failed.failure["key"]) == ("budget_exhausted", "cost_usd")
    assert "cost_usd" in failed.failure["message"]
    assert failed.usage == {"cost_usd": Decimal("0.3"), "input_tokens": 100}
    assert event_types(client, run)[-1] == "run.failed"
    # A budget of 0 stops the first turn.
    zero = client.submit("acme", "agent", budget={"cost_usd": 0}).run_id
    z = claim_one(client)
    assert client.begin_turn(zero, z.epoch) is False
    assert client.get_run(zero).failure["code"] == "budget_exhausted"  # type: ignore[index]


def test_set_budget(client: Client) -> None:
    run = client.submit("acme", "agent").run_id
    assert client.set_budget(run, {"cost_usd": Decimal("1.50")}) is True
    assert client.get_run(run).budget == {"cost_usd": Decimal("1.50")}
    c = claim_one(client)
    assert c.budget == {"cost_usd": Decimal("1.50")}
    assert client.set_budget(run, {"input_tokens": 10}) is True  # replaced, not merged
    assert client.get_run(run).budget == {"input_tokens": 10}
    client.record_usage(run, c.epoch, {"input_tokens": 10})
    assert client.set_budget(run, None) is True  # removed: the gate lets it go on
    assert client.get_run(run).budget is None
    assert client.begin_turn(run, c.epoch) is True
    client.set_budget(run, {"input_tokens": 10})
    assert client.begin_turn(run, c.epoch) is False  # failed budget_exhausted
    assert client.set_budget(run, {"input_tokens": 100}) is True  # failed: may be redriven
    assert client.redrive(run) is True
    assert client.get_run(run).usage == {"input_tokens": 10}  # the totals span attempts
    for bad in ({}, {"input_tokens": -1}, {"input_tokens": "x"}):
        with pytest.raises(InvalidArgument, match="budget"):
            client.set_budget(run, bad)  # type: ignore[arg-type]
    assert client.get_run(run).budget == {"input_tokens": 100}
    done = client.submit("acme", "k", budget={"cost_usd": 1}, priority=0).run_id
    assert client.complete(done, claim_one(client, [0]).epoch) is True
    assert client.set_budget(done, {"cost_usd": 5}) is False  # succeeded: kept
    assert client.get_run(done).budget == {"cost_usd": 1}
    cancelled = client.submit("acme", "k").run_id
    client.cancel(cancelled)
    assert client.set_budget(cancelled, {"cost_usd": 5}) is False
    assert client.get_run(cancelled).budget is None
    with pytest.raises(RunNotFound):
        client.set_budget(MISSING, None)


def test_usage_report_sums_per_tenant_and_kind_in_its_window(
        client: Client, conn: psycopg.Connection[Any]) -> None:
    start = db_now(conn)
    assert client.usage_report(start) == []
    runs = {}
    for tenant, kind in (("beta", "chat"), ("acme", "report"), ("acme", "chat"),
                         ("acme", "chat")):
        runs.setdefault((tenant, kind), []).append(client.submit(tenant, kind).run_id)
    claimed = {c.run_id: c for c in client.claim([10], max_runs=10)}
    a1, a2 = runs[("acme", "chat")]
    client.record_usage(a1, claimed[a1].epoch, {"cost_usd": 0.1, "input_tokens": 10})
    client.record_usage(a2, claimed[a2].epoch, {"cost_usd": 0.2})
    client.release(a2, claimed[a2].epoch)
    client.record_usage(a2, claimed[a2].epoch, {"cost_usd": 0.3})  # fenced: counted too
    [report] = runs[("acme", "report")]
    client.record_usage(report, claimed[report].epoch, {"pages": 3})
    middle = db_now(conn)
    [beta] = runs[("beta", "chat")]
    client.record_usage(beta, claimed[beta].epoch, {"cost_usd": Decimal("1.25")})
    client.record_usage(a1, claimed[a1].epoch, {"cost_usd": 1})
    rows = client.usage_report(start)
    assert rows == [
        runq.UsageRow("acme", "chat", 2, {"cost_usd": Decimal("1.6"), "input_tokens": 10}),
        runq.UsageRow("acme", "report", 1, {"pages": 3}),
        runq.UsageRow("beta", "chat", 1, {"cost_usd": Decimal("1.25")})]
    assert all(type(v) is Decimal for r in rows for v in r.usage.values())
    # [since, until): until excluded, since included
    assert client.usage_report(start, middle) == [
        runq.UsageRow("acme", "chat", 2, {"cost_usd": Decimal("0.6"), "input_tokens": 10}),
        runq.UsageRow("acme", "report", 1, {"pages": 3})]
    assert client.usage_report(middle) == [
        runq.UsageRow("acme", "chat", 1, {"cost_usd": 1}),
        runq.UsageRow("beta", "chat", 1, {"cost_usd": Decimal("1.25")})]
    assert client.usage_report(db_now(conn)) == []
    for until in (start, start - timedelta(seconds=1)):
        with pytest.raises(InvalidArgument):
            client.usage_report(start, until)
    with pytest.raises(InvalidArgument):
        client.usage_report(None)  # type: ignore[arg-type]


def test_deadline_fails_a_running_run_at_its_next_heartbeat_and_a_queued_one_in_sweep(
        client: Client) -> None:
    running = client.submit("acme", "agent", timeout=timedelta(milliseconds=300)).run_id
    c = claim_one(client)
    assert client.heartbeat(running, c.epoch) is True
    queued = client.submit("acme", "agent", timeout=timedelta(milliseconds=300)).run_id
    time.sleep(0.4)
    assert client.record_usage(running, c.epoch, {"cost_usd": 1}) is True  # not gated
    assert client.heartbeat(running, c.epoch) is False
    failed = client.get_run(running)
    assert failed.status == "failed" and failed.failure is not None
    assert failed.failure["code"] == "deadline_exceeded"
    assert failed.usage == {"cost_usd": 1}
    assert client.sweep() == [runq.SweepAction(queued, "deadline_exceeded")]
    assert client.get_run(queued).failure["code"] == "deadline_exceeded"  # type: ignore[index]


# -- schedules -----------------------------------------------------------------------


def make_due(conn: psycopg.Connection[Any], name: str) -> None:
    """The schedule's next slot a second ago: due at the next tick. An every
    schedule's slots count from its creation, which moves back with it, so
    that the slot is its first and the only one due."""
    done = conn.execute(
        "UPDATE runq.schedule_settings SET next_slot = now() - interval '1 second',"
        " created_at = CASE WHEN every IS NULL THEN created_at"
        "                   ELSE now() - interval '1 second' - every END"
        " WHERE name = %s", [name])
    assert done.rowcount == 1, name


def slot_of(conn: psycopg.Connection[Any], payload: dict[str, Any]) -> datetime:
    """The "slot" a tick put in a run's payload (ISO 8601 UTC, with Z), read
    by the server."""
    text = payload["slot"]
    assert isinstance(text, str) and text.endswith("Z"), payload
    row = conn.execute("SELECT %s::timestamptz", [text]).fetchone()
    assert row is not None
    return row[0]


def test_create_schedule_created_then_replaced_and_schedules_by_name(
        client: Client, conn: psycopg.Connection[Any]) -> None:
    assert client.schedules() == []
    before = db_now(conn)
    assert client.create_schedule("nightly", "acme", "report", cron="0 3 * * *",
                                  timezone="Europe/Paris") is True
    assert client.create_schedule("ping", "beta", "ping", every=timedelta(minutes=15)) is True
    assert client.create_schedule("hourly", "acme", "sync", cron="0 * * * *") is True
    after = db_now(conn)
    rows = client.schedules()
    assert [s.name for s in rows] == ["hourly", "nightly", "ping"]  # by name
    assert all(type(s) is runq.Schedule for s in rows)
    hourly, nightly, ping = rows
    assert (nightly.tenant_id, nightly.kind, nightly.cron, nightly.every, nightly.timezone) == (
        "acme", "report", "0 3 * * *", None, "Europe/Paris")
    assert (hourly.cron, hourly.every, hourly.timezone) == ("0 * * * *", None, "UTC")
    assert (ping.tenant_id, ping.kind, ping.cron, ping.timezone) == ("beta", "ping", None, "UTC")
    assert type(ping.every) is timedelta and ping.every == timedelta(minutes=15)
    assert [(s.last_slot, s.last_run_id, s.paused) for s in rows] == [(None, None, False)] * 3
    # The first slots: 03:00 in Paris, the top of the hour, 15 minutes on.
    paris = nightly.next_slot.astimezone(ZoneInfo("Europe/Paris"))
    assert (paris.hour, paris.minute, paris.second, paris.microsecond) == (3, 0, 0, 0)
    assert before < nightly.next_slot <= after + timedelta(days=1)
    assert (hourly.next_slot.minute, hourly.next_slot.second) == (0, 0)
    assert before < hourly.next_slot <= after + timedelta(hours=1)
    assert before + ping.every <= ping.next_slot <= after + ping.every
    assert isinstance(ping.next_slot, datetime) and ping.next_slot.tzinfo is not None

    # The same timing again (a deploy declaring its schedules): replaced, the
    # next slot kept.
    assert client.create_schedule("ping", "beta", "ping", every=timedelta(minutes=15),
                                  payload={"v": 2}, priority=20) is False
    assert client.schedules()[2] == ping
    # Another timing, tenant and kind: replaced, a new first slot.
    assert client.create_schedule("ping", "gamma", "pong", cron="*/5 * * * *") is False
    again = client.schedules()
    assert [s.name for s in again] == ["hourly", "nightly", "ping"]
    assert again[:2] == [hourly, nightly]
    moved = again[2]
    assert (moved.tenant_id, moved.kind, moved.cron, moved.every) == (
        "gamma", "pong", "*/5 * * * *", None)
    assert moved.next_slot.minute % 5 == 0 and moved.next_slot.second == 0
    assert moved.next_slot <= db_now(conn) + timedelta(minutes=5)


def test_tick_makes_a_run_with_the_schedules_fields_and_the_slot(
        client: Client, conn: psycopg.Connection[Any]) -> None:
    assert client.create_schedule(
        "report", "acme", "report", every=timedelta(hours=1), payload={"pages": 3},
        priority=20, max_attempts=5, recovery_policy="fail", queue_ttl=timedelta(minutes=10),
        timeout=timedelta(minutes=30)) is True
    assert client.tick() == []  # its first slot is an hour away
    make_due(conn, "report")
    [row] = client.tick()
    assert type(row) is runq.TickRow
    assert (row.schedule, row.outcome) == ("report", "created")
    assert isinstance(row.slot, datetime) and row.slot < db_now(conn)
    assert isinstance(row.run_id, int)
    run = client.get_run(row.run_id)
    assert (run.tenant_id, run.kind, run.status, run.priority, run.max_attempts) == (
        "acme", "report", "queued", 20, 5)
    assert run.deadline == run.created_at + timedelta(minutes=30)
    assert conn.execute("SELECT schedule, recovery_policy, queue_ttl FROM runq.runs"
                        " WHERE run_id = %s", [run.run_id]).fetchone() == (
        "report", "fail", timedelta(minutes=10))
    [created] = client.run_events(run.run_id)
    assert created.type == "run.created"
    assert (created.payload["schedule"], created.payload["priority"]) == ("report", 20)
    assert slot_of(conn, created.payload) == row.slot
    c = claim_one(client, [20])
    assert c.run_id == row.run_id
    assert c.payload == {"pages": 3, "slot": c.payload["slot"]}
    assert slot_of(conn, c.payload) == row.slot
    [schedule] = client.schedules()
    assert (schedule.last_slot, schedule.last_run_id) == (row.slot, row.run_id)
    assert schedule.next_slot > db_now(conn)
    assert client.tick() == []  # handled: the next slot is an hour on


def test_tick_skips_a_slot_while_the_schedules_run_is_live(
        client: Client, conn: psycopg.Connection[Any]) -> None:
    client.create_schedule("ping", "acme", "ping", every=timedelta(hours=1))
    make_due(conn, "ping")
    [first] = client.tick()
    assert first.outcome == "created" and first.run_id is not None
    make_due(conn, "ping")
    [queued] = client.tick()  # its run is still queued
    assert (queued.schedule, queued.run_id, queued.outcome) == (
        "ping", first.run_id, "skipped_overlap")
    assert queued.slot > first.slot
    c = claim_one(client)
    make_due(conn, "ping")
    [running] = client.tick()  # and now running
    assert (running.run_id, running.outcome) == (first.run_id, "skipped_overlap")
    [schedule] = client.schedules()
    assert (schedule.last_slot, schedule.last_run_id) == (running.slot, first.run_id)
    assert client.complete(first.run_id, c.epoch) is True
    make_due(conn, "ping")
    [second] = client.tick()  # the run ended: the next slot runs
    assert second.outcome == "created" and second.run_id not in (None, first.run_id)
    assert second.slot > running.slot
    assert conn.execute("SELECT count(*) FROM runq.runs WHERE schedule = 'ping'").fetchone() == (2,)
    assert client.schedules()[0].last_run_id == second.run_id


def test_tick_reports_missed_schedule_slots_once_and_takes_at_most_max_runs(
        client: Client, conn: psycopg.Connection[Any]) -> None:
    client.create_schedule("hourly", "acme", "k", every=timedelta(hours=1))
    client.create_schedule("other", "acme", "k", every=timedelta(hours=1))
    # hourly as if created 3 h 1 min ago and never ticked: three slots passed.
    row = conn.execute(
        "UPDATE runq.schedule_settings SET created_at = now() - interval '3 hours 1 minute',"
        " next_slot = now() - interval '2 hours 1 minute' WHERE name = 'hourly'"
        " RETURNING created_at").fetchone()
    assert row is not None
    created_at = row[0]
    make_due(conn, "other")  # due two hours after hourly's slot: ticked after it
    with pytest.raises(InvalidArgument, match="max_runs"):
        client.tick(max_runs=0)
    rows = client.tick(max_runs=1)
    assert [(r.schedule, r.outcome) for r in rows] == [("hourly", "missed"),
                                                       ("hourly", "created")]
    missed, made = rows
    assert missed.run_id is None  # the oldest skipped slot; the newest one runs
    assert missed.slot == created_at + timedelta(hours=1)
    assert made.slot == created_at + timedelta(hours=3) and made.run_id is not None
    assert slot_of(conn, claim_one(client).payload) == made.slot
    [other] = client.tick(max_runs=1)
    assert (other.schedule, other.outcome) == ("other", "created")
    assert client.tick() == []


def test_a_paused_schedule_does_not_tick(client: Client, conn: psycopg.Connection[Any]) -> None:
    client.create_schedule("ping", "acme", "ping", every=timedelta(hours=1))
    assert client.pause("schedule", "ping", reason="maintenance") is True
    assert [s.paused for s in client.schedules()] == [True]
    make_due(conn, "ping")
    assert client.tick() == []
    assert client.queue_stats() == []
    assert client.resume("schedule", "ping") is True
    assert [s.paused for s in client.schedules()] == [False]
    [row] = client.tick()  # the slot it held back is still due
    assert row.outcome == "created"


def test_drop_schedule(client: Client, conn: psycopg.Connection[Any]) -> None:
    assert client.drop_schedule("nope") is False
    client.create_schedule("ping", "acme", "ping", every=timedelta(hours=1))
    client.create_schedule("keep", "acme", "ping", cron="0 3 * * *")
    make_due(conn, "ping")
    [row] = client.tick()
    assert row.run_id is not None
    assert client.drop_schedule("ping") is True
    assert client.drop_schedule("ping") is False
    assert [s.name for s in client.schedules()] == ["keep"]
    assert client.get_run(row.run_id).status == "queued"  # its run is left as it is
    assert client.create_schedule("ping", "acme", "ping", every=timedelta(hours=1)) is True


def test_create_schedule_refuses_bad_arguments_naming_the_value(client: Client) -> None:
    client.create_schedule("keep", "acme", "report", cron="0 3 * * *")
    kept = client.schedules()
    bad: list[tuple[dict[str, Any], tuple[str, ...]]] = [
        ({"cron": "bogus"}, ("cron", "bogus")),
        ({"cron": "* * * *"}, ("cron", "* * * *")),
        ({"cron": "61 * * * *"}, ("minute", "61")),
        ({"cron": "0 3 * * *", "every": timedelta(hours=1)}, (
            "exactly one of cron and every", "0 3 * * *")),
        ({}, ("exactly one of cron and every", "NULL")),
        ({"every": timedelta(0)}, ("every",)),
        ({"cron": "0 3 * * *", "timezone": "Mars/Base"}, ("timezone", "Mars/Base")),
        ({"cron": "0 3 * * *", "priority": 40000}, ("priority", "40000")),
        ({"cron": "0 3 * * *", "recovery_policy": "sometimes"}, ("recovery_policy", "sometimes")),
        ({"cron": "0 3 * * *", "payload": [1]}, ("payload",)),
    ]
    for name in ("new", "keep"):  # neither a creation nor a replacement
        for kwargs, names in bad:
            with pytest.raises(InvalidArgument) as info:
                client.create_schedule(name, "acme", "report", **kwargs)
            assert info.value.sqlstate == "22023"
            for part in names:
                assert part in str(info.value), (kwargs, str(info.value))
    assert client.schedules() == kept


# -- sources and transactions -------------------------------------------------------


def test_conninfo_client_connects_only_when_entered(db_url: str) -> None:
    client = Client.connect(db_url)
    with pytest.raises(RuntimeError, match="not open"):
        client.queue_stats()
    with client:
        assert client.queue_stats() == []
    with pytest.raises(RuntimeError):
        client.queue_stats()
    Client.connect("postgresql://nobody@127.0.0.1:1/none")  # no error: nothing connects


def test_callers_autocommit_connection_is_used_and_left_open(conn: psycopg.Connection[Any],
                                                            connect: Connect) -> None:
    with Client(conn) as client:
        run = client.submit("t", "k").run_id
    assert not conn.closed
    assert Client(connect()).get_run(run).status == "queued"


def test_non_autocommit_connection_commits_each_call(db_url: str, connect: Connect) -> None:
    with psycopg.connect(db_url) as mine:
        client = Client(mine)
        run = client.submit("t", "k").run_id
        assert mine.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert Client(connect()).get_run(run).status == "queued"
        with pytest.raises(RunNotFound):
            client.get_run(MISSING)
        assert mine.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_inside_the_callers_transaction_a_call_is_part_of_it(db_url: str,
                                                              connect: Connect) -> None:
    other = Client(connect())
    with psycopg.connect(db_url) as mine:
        client = Client(mine)
        with mine.transaction(force_rollback=True):
            run = client.submit("t", "k", session_id="s").run_id
            with pytest.raises(SessionBusy):  # rolls back to its savepoint only
                client.submit("t", "k", session_id="s")
            assert client.get_run(run).status == "queued"
            with pytest.raises(RunNotFound):
                other.get_run(run)  # not committed yet
        with pytest.raises(RunNotFound):
            other.get_run(run)  # rolled back with the caller's transaction


def test_explicit_transaction_on_an_autocommit_connection(conn: psycopg.Connection[Any],
                                                          connect: Connect) -> None:
    client = Client(conn)
    with conn.transaction() as tx:
        run = client.submit("t", "k", session_id="s").run_id
        with pytest.raises(SessionBusy):  # the caller's transaction survives it
            client.submit("t", "k", session_id="s")
        assert client.cancel(run) == "cancelled"
        with pytest.raises(RunNotFound):
            Client(connect()).get_run(run)
        raise psycopg.Rollback(tx)
    with pytest.raises(RunNotFound):
        client.get_run(run)


def test_pool_source(db_url: str) -> None:
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        client = Client(pool)
        run = client.submit("t", "k").run_id
        assert client.get_run(run).status == "queued"
        with pytest.raises(RunNotFound):
            client.get_run(MISSING)
        assert claim_one(client).run_id == run
        assert pool.get_stats()["pool_available"] >= 1


def test_other_errors_pass_through_unchanged(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SET ROLE runq_client")
    client = Client(conn)
    client.submit("t", "k")  # granted
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as info:
        client.claim([0])  # runq_worker's
    assert from_psycopg(info.value) is None
    assert not isinstance(info.value, RunqError)


def test_row_factory_of_a_callers_connection_does_not_matter(db_url: str) -> None:
    from psycopg.rows import dict_row
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as mine:
        client = Client(mine)
        run = client.submit("t", "k").run_id
        assert client.cancel(run) == "cancelled"
        assert client.get_run(run).status == "cancelled"


# -- jsonb round trip --------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"),
                max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | _text
    # jsonb numbers are decimals: a float past 2**53 comes back as the int
    # its decimal spelling names, so stay in the range where floats are exact
    | st.floats(min_value=-1e15, max_value=1e15),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.dictionaries(_text, _json, max_size=5), state=_json.filter(
    lambda v: v is not None))
def test_jsonb_arguments_round_trip(client: Client, payload: dict[str, Any], state: Any) -> None:
    run = client.submit("t", "k", payload).run_id
    c = claim_one(client)
    assert c.run_id == run and c.payload == payload
    assert client.checkpoint(run, c.epoch, state) is True
    assert client.release(run, c.epoch) is True
    assert claim_one(client).checkpoint == state
    client.cancel(run)
    assert client.heartbeat(run, c.epoch + 1) is False
