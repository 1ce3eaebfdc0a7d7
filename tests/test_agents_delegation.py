"""A durable agent delegates to other agents as child runs
(runq.agents.pydantic_ai.delegate and child_results): tests/agent_handlers.py's
agent.planner calls its ``research`` tool once per city in one response, each
call a child run of agent.researcher (a durable agent that calls a
non_idempotent ``note`` and answers), run by real worker processes
(``python -m runq.pool agent_handlers``, lease 2 s) against a real server.

  test_a_parent_delegates_to_two_children_and_answers_with_both
      the planner's handler spawns two children (keys made from the
      response's number and the tool call's id, payload the call's
      arguments) and ends waiting for them (waiting_for_children, no worker
      held); two workers run the children; the planner resumes, its first
      request replayed from the journal, and answers with both results.
      Each model request of the three runs was sent once and journaled once;
      note ran once per child; the planner's usage is its journal's plus its
      children's (the roll-up), each priced exactly.
  test_a_killed_worker_and_the_program_still_completes
      the worker kills itself (SIGKILL) at one point, in the planner or in a
      researcher; the sweep requeues that run and a second worker finishes
      the program:
        planner.after_spawn      - one child spawned, the other maybe not:
                                   the resumed planner spawns under the same
                                   keys, so two children, not three or four;
        planner.before_wait      - both spawned, wait_children not sent;
        planner.after_record:2   - the answer's request journaled, complete
                                   not sent: the resumed planner gets the
                                   same results and replays its request 2;
        researcher.after_record:1 - a child's first request journaled;
        researcher.in_tool:note  - a child's note cut off: not run again, the
                                   child's model is told its outcome is
                                   unknown, and so is the planner's answer;
        researcher.after_tool:note - a child's note finished: reused.
      Each time: two children, note's effect once per child, no model
      request of any run sent twice, every run's totals equal to its
      journal's usage (its children's added for the planner).
  test_the_parents_budget_stops_a_child_and_the_parent_is_told
      a budget of 3 requests on the planner: its request and the first
      child's two reach it, so the second child's gate (begin_turn) refuses
      its first request (budget_exhausted naming the planner's run_id) and
      the child fails having sent nothing; the planner resumes and is told
      (child_results: the first child's answer, and a ToolFailed naming
      budget_exhausted and the planner's run), and its own gate then
      refuses its next request: it fails budget_exhausted too.
  test_a_childs_own_budget_stops_it_and_the_parent_goes_on
      each child has a budget of 1 request (delegate(..., budget=...)):
      each sends one, runs note, and is stopped at its second request
      (budget_exhausted naming itself); the planner, whose own budget has
      room, is told both failures and answers with them.
  test_delegation_needs_a_run_and_tells_the_model_how_a_child_ended
      offline: a delegation tool called outside durable(ctx) (TestModel)
      raises UserError; what the model is told of a child that succeeded,
      failed or was cancelled; a key too long for runq.spawn is hashed.
"""
from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.exceptions import ToolFailed, UserError
from pydantic_ai.models.test import TestModel
from runq import ChildRun, Client
from runq.agents.journal import UNKNOWN_OUTCOME
from runq.agents.pydantic_ai import child_key, child_outcome, delegate
from test_agents import LEASE, ledger, rows, spawn, stop

PLANNER = "agent.planner"
TERMINAL = ("succeeded", "failed", "cancelled")


@pytest.fixture
def tables(db_url: str) -> str:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE agent_requests (run_id bigint, step int, epoch bigint,"
                     " pid int, at timestamptz DEFAULT clock_timestamp())")
        conn.execute("CREATE TABLE agent_effects (run_id bigint, tool text, epoch bigint,"
                     " pid int, what text, at timestamptz DEFAULT clock_timestamp())")
        conn.execute("CREATE TABLE agent_told (run_id bigint, epoch bigint, call_id text,"
                     " failed boolean, outcome text)")
    return db_url


@pytest.fixture
def workers() -> Iterator[list[Any]]:
    procs: list[Any] = []
    yield procs
    for proc in procs:
        stop(proc)


def wait_for(c: Client, run_id: int, statuses: tuple[str, ...], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = c.get_run(run_id)
        if run.status in statuses:
            return run
        time.sleep(0.1)
    pytest.fail(f"run {run_id} is {c.get_run(run_id).status}, not {statuses}")


def family_usage(c: Client, run_id: int) -> dict[str, Decimal]:
    """The journaled usage of a run and of its children, summed."""
    total: dict[str, Decimal] = {}
    for r in [run_id, *(child.run_id for child in c.children(run_id))]:
        for key, value in ledger(c, r).items():
            total[key] = total.get(key, Decimal(0)) + value
    return total


def sent_once(db_url: str) -> Counter[tuple[int, int]]:
    """How many times each (run, request) reached the model."""
    return Counter(rows(db_url, "SELECT run_id, step FROM agent_requests"))


def test_a_parent_delegates_to_two_children_and_answers_with_both(
        tables: str, tmp_path: Path, workers: list[Any]) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", PLANNER, {"prompt": "Paris, Rome"}, priority=0).run_id
        workers.append(spawn(db_url, tmp_path, "w1"))
        workers.append(spawn(db_url, tmp_path, "w2"))
        run = wait_for(c, run_id, TERMINAL)
        assert run.status == "succeeded", run
        assert run.result == {"answer": "Paris: noted Paris; Rome: noted Rome"}

        # Spawned at once, in no fixed order: sorted by key.
        children = sorted(c.children(run_id), key=lambda ch: ch.key)
        assert [(ch.key, ch.kind) for ch in children] == [
            ("1:c-paris", "agent.researcher"), ("1:c-rome", "agent.researcher")]
        assert all(c.get_run(ch.run_id).parent_run_id == run_id for ch in children)
        # The first attempt spawned both and ended waiting for them (its
        # lease ended: no worker held); the last child's end queued the
        # planner, and a second attempt, resumed, finished it.
        events = [(e.epoch, e.type) for e in c.run_events(run_id)]
        assert [t for ep, t in events if ep == 1][-4:] == [
            "run.spawned", "run.spawned", "run.waiting_for_children", "run.children_done"]
        assert [e.payload for e in c.run_events(run_id)
                if e.type == "run.waiting_for_children"] == [{"children": 2}]
        assert max(ep for ep, _ in events) == 2
        # A delegation is no tool call of the journal: the spawn's key is
        # what makes it take effect once.
        assert c.tool_calls(run_id) == []
        assert [(ch.status, ch.result) for ch in children] == [
            ("succeeded", {"answer": "Paris: noted Paris"}),
            ("succeeded", {"answer": "Rome: noted Rome"})]
        # What the planner's handler was told, on its resumed attempt.
        assert rows(db_url, "SELECT call_id, failed, outcome FROM agent_told ORDER BY call_id"
                    ) == [("c-paris", False, '{"answer": "Paris: noted Paris"}'),
                          ("c-rome", False, '{"answer": "Rome: noted Rome"}')]
        # Each request of each run reached the model once and was journaled
        # once: the planner's first by its first attempt, replayed by the
        # resumed one, which sent the second.
        runs = [run_id, *(ch.run_id for ch in children)]
        assert sent_once(db_url) == {(r, s): 1 for r in runs for s in (1, 2)}
        for r in runs:
            assert [(m.seq, m.applied) for m in c.model_calls(r)] == [(1, True), (2, True)]
        assert [(m.seq, m.epoch) for m in c.model_calls(run_id)] == [(1, 1), (2, 2)]
        turns = Counter(e.epoch for e in c.run_events(run_id) if e.type == "run.turn_started")
        assert turns == {1: 1, 2: 1}  # the replayed request took no turn
        assert Counter(w for (w,) in rows(db_url, "SELECT what FROM agent_effects"
                                                  " WHERE tool = 'note'")) == {"Paris": 1,
                                                                               "Rome": 1}
        # The children's usage rolled up to the planner's totals.
        for ch in children:
            assert ch.usage == ledger(c, ch.run_id) and ch.usage["requests"] == 2
        assert run.usage == family_usage(c, run_id)
        assert run.usage["requests"] == 6


@pytest.mark.parametrize("fault", [
    "planner.after_spawn",
    "planner.before_wait",
    "planner.after_record:2",
    "researcher.after_record:1",
    "researcher.in_tool:note",
    "researcher.after_tool:note",
])
def test_a_killed_worker_and_the_program_still_completes(
        tables: str, tmp_path: Path, workers: list[Any], fault: str) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", PLANNER, {"prompt": "Paris, Rome"}, priority=0).run_id
        first = spawn(db_url, tmp_path, "w1", fault)
        workers.append(first)
        assert first.wait(timeout=60) == -signal.SIGKILL, (tmp_path / "w1.log").read_text()
        time.sleep(LEASE + 0.5)
        requeued = [a.run_id for a in c.sweep() if a.action == "requeued"]
        assert len(requeued) == 1, requeued
        assert (requeued[0] == run_id) == fault.startswith("planner.")
        workers.append(spawn(db_url, tmp_path, "w2"))
        run = wait_for(c, run_id, TERMINAL)
        assert run.status == "succeeded", run

        children = sorted(c.children(run_id), key=lambda ch: ch.key)
        assert [ch.key for ch in children] == ["1:c-paris", "1:c-rome"]
        assert all(ch.status == "succeeded" for ch in children), children
        answers = {"Paris": "Paris: noted Paris", "Rome": "Rome: noted Rome"}
        if fault == "researcher.in_tool:note":
            # The child cut off in note was told its outcome is unknown, and
            # answered so; the other noted its city.
            [cut] = [city for city, ch in zip(answers, children, strict=True)
                     if ch.run_id == requeued[0]]
            answers[cut] = f"{cut}: {UNKNOWN_OUTCOME}"
        assert run.result == {"answer": "; ".join(answers.values())}
        # No tool effect twice, no model request sent twice.
        assert Counter(w for (w,) in rows(db_url, "SELECT what FROM agent_effects"
                                                  " WHERE tool = 'note'")) == {"Paris": 1,
                                                                               "Rome": 1}
        runs = [run_id, *(ch.run_id for ch in children)]
        assert sent_once(db_url) == {(r, s): 1 for r in runs for s in (1, 2)}
        for r in runs:
            assert [(m.seq, m.applied) for m in c.model_calls(r)] == [(1, True), (2, True)]
        for ch in children:
            assert ch.usage == ledger(c, ch.run_id)
        assert run.usage == family_usage(c, run_id)
        assert run.usage["requests"] == 6


def test_the_parents_budget_stops_a_child_and_the_parent_is_told(
        tables: str, tmp_path: Path, workers: list[Any]) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", PLANNER, {"prompt": "Paris, Rome"}, priority=0,
                          budget={"requests": 3}).run_id
        workers.append(spawn(db_url, tmp_path, "w1"))  # one slot: one run at a time
        run = wait_for(c, run_id, TERMINAL)

        children = c.children(run_id)
        assert sorted(ch.status for ch in children) == ["failed", "succeeded"], children
        [done] = [ch for ch in children if ch.status == "succeeded"]
        [stopped] = [ch for ch in children if ch.status == "failed"]
        # The planner's budget stopped the child at its gate: its failure
        # names the planner's run, and it sent no request.
        assert stopped.failure is not None
        assert stopped.failure["code"] == "budget_exhausted"
        assert stopped.failure["run_id"] == run_id
        assert stopped.failure["key"] == "requests"
        assert c.model_calls(stopped.run_id) == []
        assert [e.type for e in c.run_events(stopped.run_id)].count("run.turn_started") == 0
        assert rows(db_url, "SELECT count(*) FROM agent_requests WHERE run_id = %s",
                    [stopped.run_id]) == [(0,)]

        # The planner was told: the first child's answer, and the second's
        # failure as a failed tool result naming the budget and its run.
        told = dict((call_id, (failed, outcome)) for call_id, failed, outcome in rows(
            db_url, "SELECT call_id, failed, outcome FROM agent_told WHERE run_id = %s",
            [run_id]))
        assert len(told) == 2
        failed = [outcome for is_failed, outcome in told.values() if is_failed]
        assert len(failed) == 1
        assert f"The delegated run {stopped.run_id} (agent.researcher) failed: budget_exhausted" \
            in failed[0]
        assert f'"run_id": {run_id}' in failed[0]
        assert [outcome for is_failed, outcome in told.values() if not is_failed] == [
            f'{{"answer": "{done.result["answer"]}"}}']

        # Its own gate then refused its next request: the budget holds
        # across the family, and the planner fails as its child did.
        assert run.status == "failed" and run.failure is not None, run
        assert run.failure["code"] == "budget_exhausted"
        assert run.failure["run_id"] == run_id
        assert rows(db_url, "SELECT step FROM agent_requests WHERE run_id = %s",
                    [run_id]) == [(1,)]
        assert run.usage == family_usage(c, run_id)
        assert run.usage["requests"] == 3


def test_a_childs_own_budget_stops_it_and_the_parent_goes_on(
        tables: str, tmp_path: Path, workers: list[Any]) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", PLANNER, {"prompt": "Paris, Rome", "child_budget": True},
                          priority=0, budget={"requests": 10}).run_id
        workers.append(spawn(db_url, tmp_path, "w1"))
        run = wait_for(c, run_id, TERMINAL)
        assert run.status == "succeeded", run
        children = sorted(c.children(run_id), key=lambda ch: ch.key)
        for ch in children:
            assert ch.status == "failed" and ch.failure is not None, ch
            assert (ch.failure["code"], ch.failure["run_id"]) == ("budget_exhausted",
                                                                  ch.run_id)
            assert [m.seq for m in c.model_calls(ch.run_id)] == [1]
        # note ran before the second request was refused: the planner is
        # told the child failed, and that what it did may have taken effect.
        assert Counter(w for (w,) in rows(db_url, "SELECT what FROM agent_effects"
                                                  " WHERE tool = 'note'")) == {"Paris": 1,
                                                                               "Rome": 1}
        answers = run.result["answer"].split("; failed: ")
        assert len(answers) == 2 and answers[0].startswith("failed: ")
        for text, ch in zip([answers[0].removeprefix("failed: "), answers[1]], children,
                            strict=True):
            assert text.startswith(f"The delegated run {ch.run_id} (agent.researcher) failed:"
                                   " budget_exhausted: ")
            assert text.endswith("whatever it did before it stopped may or may not have"
                                 " taken effect.")
        assert run.usage == family_usage(c, run_id)
        assert run.usage["requests"] == 4


def test_delegation_needs_a_run_and_tells_the_model_how_a_child_ended() -> None:
    tool = delegate("agent.researcher", description="Research a city.")
    assert (tool.name, tool.durable) == ("agent_researcher", False)
    agent: Agent[None, Any] = Agent(TestModel(), output_type=[str, DeferredToolRequests],
                                    tools=[tool])
    with pytest.raises(UserError, match="durable"):
        agent.run_sync("Paris")

    done = ChildRun("1:a", 7, "agent.researcher", "succeeded", {"answer": "sunny"}, None)
    assert child_outcome(done) == {"answer": "sunny"}
    failed = ChildRun("1:b", 8, "agent.researcher", "failed", None, {
        "code": "lease_expired", "message": "max attempts reached", "attempts": 3,
        "at": "2026-01-01T00:00:00Z", "epoch": 3, "attempt": 3})
    assert child_outcome(failed) == ToolFailed(
        "The delegated run 8 (agent.researcher) failed: lease_expired: max attempts reached"
        ' ({"attempts": 3}). It did not finish: whatever it did before it stopped may or may'
        " not have taken effect.")
    cancelled = ChildRun("1:c", 9, "agent.researcher", "cancelled", None, None)
    assert child_outcome(cancelled) == ToolFailed(
        "The delegated run 9 (agent.researcher) was cancelled. It did not finish: whatever it"
        " did before it stopped may or may not have taken effect.")

    assert child_key(2, "call_abc") == "2:call_abc"
    long = child_key(2, "x" * 300)
    assert long.startswith("2:sha256:") and len(long) <= 256
    assert long == child_key(2, "x" * 300)
