"""pydantic-ai agents on runq (runq.agents): the agent of
tests/agent_handlers.py (search, then a non-idempotent send, then an
answer, its model a scripted FunctionModel) run by real worker processes
(``python -m runq.pool agent_handlers``, lease 2 s) against a real server.

  test_killed_worker_resumes
      the worker kills itself (SIGKILL) at one point of the run; the lease
      ends, the sweep requeues it, a second worker finishes it:
        before_record:2 - model response 2 came, its record never committed:
                          request 2 is sent again, nothing before it is;
        after_record:2  - it committed: no request is sent twice;
        after_record:3  - the answer's request committed: it is replayed, its
                          text emitted again under the new epoch;
        in_tool:search  - a read_only call cut off: retryable, run again;
        in_tool:send    - a non_idempotent call cut off: uncertain, not run
                          again, and the model is told its outcome is unknown;
        after_tool:send - end_tool committed: the outcome is reused.
      Each time: send's body ran at most once (its own table), every request
      sent before the last recorded one was sent once, a turn counted for each
      request sent and none for one replayed, the ledger's totals
      equal the usage of the journaled requests (killed attempt's included)
      priced exactly, the run succeeded with the answer the script gives, and
      the output the second epoch emitted reads as that answer.
  test_a_request_sent_again_after_an_error_keeps_its_number
      request 2 fails once (a server error) and pydantic-ai's
      RetryOnModelErrors sends it again: it is journaled as request 2, and
      the next worker replays requests 1 and 2 (the retry's notes on the
      response are not part of the request's hash).
  test_a_changed_request_is_not_replayed
      the second worker's agent has instructions the first's had not: its
      first request differs from the journaled one, so the run fails with
      replay_diverged (request 1, epoch 1), and nothing is sent or run.
  test_stale_worker_stops_at_its_first_refused_write
      a worker stopped (SIGSTOP) inside search while the sweep takes its run
      and a second worker finishes it; resumed (SIGCONT), it sends no
      further model request and runs no further tool.
  test_budget_stops_the_agent_before_the_request
      a budget of 2 requests: the third request is never sent; the run
      fails budget_exhausted.
  test_approval_through_ask_user_and_deliver_input
      send needs approval: the run waits for its user with the question,
      send neither begun (runq.tool_calls) nor run; deliver_input approves it; the agent resumes from its
      journal (request 1 not sent again), send runs once, the run succeeds.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from runq import Client
from runq.agents.journal import UNKNOWN_OUTCOME

LEASE = 2
KIND = "agent.scripted"
PRICE_IN, PRICE_OUT = Decimal("0.000003"), Decimal("0.000015")


@pytest.fixture
def tables(db_url: str) -> str:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE agent_requests (run_id bigint, step int, epoch bigint,"
                     " pid int, at timestamptz DEFAULT clock_timestamp())")
        conn.execute("CREATE TABLE agent_effects (run_id bigint, tool text, epoch bigint,"
                     " pid int, what text, at timestamptz DEFAULT clock_timestamp())")
    return db_url


def spawn(db_url: str, tmp_path: Path, name: str, fault: str = "",
          instructions: str = "", flaky: bool = False) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RUNQ_AGENT_DB": db_url, "RUNQ_AGENT_FAULT": fault,
           "RUNQ_AGENT_INSTRUCTIONS": instructions, "RUNQ_AGENT_FLAKY": "1" if flaky else "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).parent),
                                                     os.environ.get("PYTHONPATH")) if p)}
    with open(tmp_path / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "runq.pool", "agent_handlers", "--database-url", db_url,
             "--lease", str(LEASE), "--sweep-every", "0", "--poll", "0.2", "--grace", "1",
             "--slot", "0:1", "--worker-id", name],
            env=env, stdout=log, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
    proc.wait(timeout=20)


def rows(db_url: str, sql: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args or []).fetchall()


def sweep_after_lease(c: Client, run_id: int) -> None:
    time.sleep(LEASE + 0.5)
    assert run_id in [a.run_id for a in c.sweep() if a.action == "requeued"]


def finish(c: Client, db_url: str, tmp_path: Path, run_id: int, instructions: str = "") -> Any:
    worker = spawn(db_url, tmp_path, "w2", instructions=instructions)
    try:
        return c.wait(run_id, timeout=60)
    finally:
        stop(worker)


def ledger(c: Client, run_id: int) -> dict[str, Decimal]:
    """The run's journaled requests' usage summed, each priced exactly by
    the price table the agent was given (tests/agent_handlers.py)."""
    total: Counter[str] = Counter()
    for m in c.model_calls(run_id):
        assert m.usage is not None and m.usage["requests"] == 1
        assert m.usage["cost_usd"] == (m.usage["input_tokens"] * PRICE_IN
                                       + m.usage["output_tokens"] * PRICE_OUT)
        total.update(m.usage)
    return dict(total)


@pytest.mark.parametrize("fault, answer, searches", [
    ("before_record:2", "done: sent to ann", 1),
    ("after_record:2", "done: sent to ann", 1),
    ("after_record:3", "done: sent to ann", 1),
    ("in_tool:search", "done: sent to ann", 2),
    ("in_tool:send", f"done: {UNKNOWN_OUTCOME}", 1),
    ("after_tool:send", "done: sent to ann", 1),
])
def test_killed_worker_resumes(tables: str, tmp_path: Path, fault: str, answer: str,
                               searches: int) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", KIND, {"prompt": "weather for ann"}, priority=0).run_id
        first = spawn(db_url, tmp_path, "w1", fault)
        assert first.wait(timeout=60) == -signal.SIGKILL, (tmp_path / "w1.log").read_text()
        sweep_after_lease(c, run_id)
        run = finish(c, db_url, tmp_path, run_id)
        assert run.status == "succeeded", run
        assert run.result == {"answer": answer}

        effects = Counter(t for (t,) in rows(db_url, "SELECT tool FROM agent_effects"))
        assert effects == {"search": searches, "send": 1}
        journal = c.model_calls(run_id)
        assert [(m.seq, m.applied) for m in journal] == [(s, True) for s in (1, 2, 3)]
        sent = Counter(rows(db_url, "SELECT step, epoch FROM agent_requests"))
        recorded = {(m.seq, m.epoch) for m in journal}
        # A request is sent again only when its record never committed.
        assert all(n == 1 for n in sent.values())
        again = {s for s, e in sent if e == 1} & {s for s, e in sent if e == 2}
        assert all((s, 1) not in recorded for s in again)
        assert again == ({2} if fault == "before_record:2" else set())
        assert set(sent) - recorded == {(s, 1) for s in again}
        # A replayed request counts no turn: one run.turn_started per request sent.
        turns = Counter(e.epoch for e in c.run_events(run_id) if e.type == "run.turn_started")
        assert turns == Counter(e for _, e in sent)
        # The ledger: every journaled request's usage (the killed attempt's
        # too), once, priced exactly.
        assert run.usage == ledger(c, run_id)
        assert run.usage["requests"] == len(journal) == 3
        # Streamed (or replayed) text, as output of the epoch that finished.
        chunks = c.read_output(run_id)
        assert "".join(ch.chunk for ch in chunks if ch.epoch == 2) == answer


def test_a_request_sent_again_after_an_error_keeps_its_number(tables: str,
                                                              tmp_path: Path) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", KIND, {"prompt": "weather for ann"}, priority=0).run_id
        first = spawn(db_url, tmp_path, "w1", "after_record:2", flaky=True)
        assert first.wait(timeout=60) == -signal.SIGKILL, (tmp_path / "w1.log").read_text()
        sweep_after_lease(c, run_id)
        run = finish(c, db_url, tmp_path, run_id)
        assert run.status == "succeeded", run
        assert run.result == {"answer": "done: sent to ann"}
        sent = Counter(rows(db_url, "SELECT step, epoch FROM agent_requests"))
        assert sent == {(1, 1): 1, (2, 1): 2, (3, 2): 1}  # request 2 failed once
        assert [(m.seq, m.epoch) for m in c.model_calls(run_id)] == [(1, 1), (2, 1), (3, 2)]


def test_a_changed_request_is_not_replayed(tables: str, tmp_path: Path) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", KIND, {"prompt": "weather for ann"}, priority=0).run_id
        first = spawn(db_url, tmp_path, "w1", "after_record:2")
        assert first.wait(timeout=60) == -signal.SIGKILL, (tmp_path / "w1.log").read_text()
        sweep_after_lease(c, run_id)
        run = finish(c, db_url, tmp_path, run_id, instructions="Answer in French.")
        assert run.status == "failed" and run.failure is not None, run
        assert run.failure["code"] == "replay_diverged"
        assert (run.failure["seq"], run.failure["journaled_epoch"]) == (1, 1)
        # Nothing was sent or run under the new epoch.
        assert rows(db_url, "SELECT step, epoch FROM agent_requests ORDER BY step") == [(1, 1),
                                                                                     (2, 1)]
        assert rows(db_url, "SELECT tool, epoch FROM agent_effects") == [("search", 1)]


def test_stale_worker_stops_at_its_first_refused_write(tables: str, tmp_path: Path) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", KIND, {"prompt": "weather for ann"}, priority=0).run_id
        stale = spawn(db_url, tmp_path, "w1", "stop_in_tool:search")
        try:
            for _ in range(300):
                if Path(f"/proc/{stale.pid}/stat").read_text().split()[2] == "T":
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the worker never stopped itself")
            sweep_after_lease(c, run_id)
            run = finish(c, db_url, tmp_path, run_id)
            assert run.status == "succeeded", run
            done = rows(db_url, "SELECT clock_timestamp()")[0][0]
            stale.send_signal(signal.SIGCONT)
            for _ in range(100):
                if rows(db_url, "SELECT 1 FROM runq.run_events WHERE run_id = %s"
                                " AND type = 'run.fenced' AND epoch = 1", [run_id]):
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the stale worker wrote nothing")
            time.sleep(LEASE)  # time for anything it would still do
        finally:
            stop(stale)
        after = rows(db_url, "SELECT 'request ' || step FROM agent_requests WHERE at > %s"
                             " UNION ALL SELECT 'effect ' || tool FROM agent_effects"
                             " WHERE at > %s", [done, done])
        assert after == []
        assert rows(db_url, "SELECT step FROM agent_requests WHERE epoch = 1") == [(1,)]


def test_budget_stops_the_agent_before_the_request(tables: str, tmp_path: Path) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", KIND, {"prompt": "weather for ann"}, priority=0,
                          budget={"requests": 2}).run_id
        run = finish(c, db_url, tmp_path, run_id)
        assert run.status == "failed" and run.failure is not None, run
        assert run.failure["code"] == "budget_exhausted"
        assert rows(db_url, "SELECT step FROM agent_requests ORDER BY step") == [(1,), (2,)]
        assert run.usage == ledger(c, run_id)
        assert run.usage["requests"] == 2


def test_approval_through_ask_user_and_deliver_input(tables: str, tmp_path: Path) -> None:
    db_url = tables
    with Client.connect(db_url) as c:
        run_id = c.submit("ag", KIND, {"prompt": "weather for ann", "approve": True},
                          priority=0).run_id
        worker = spawn(db_url, tmp_path, "w1")
        try:
            run = c.wait(run_id, timeout=60)
            assert run.status == "waiting_for_user", run
            assert run.question == {"approve": ["c-send"]}
            assert rows(db_url, "SELECT tool FROM agent_effects") == [("search",)]
            # Approval comes before the tool begins.
            assert [t.call_id for t in c.tool_calls(run_id)] == ["1:c-search"]
            assert c.deliver_input(run_id, {"approve": True})
            run = c.wait(run_id, timeout=60)
        finally:
            stop(worker)
        assert run.status == "succeeded", run
        assert run.result == {"answer": "done: sent to ann"}
        assert Counter(t for (t,) in rows(db_url, "SELECT tool FROM agent_effects")) == {
            "search": 1, "send": 1}
        # The approved run of send is a call of its own.
        assert [(t.call_id, t.status) for t in c.tool_calls(run_id)] == [
            ("1:c-search", "finished"), ("2:c-send:approved", "finished")]
        assert rows(db_url, "SELECT step, count(*) FROM agent_requests GROUP BY step"
                            " ORDER BY step") == [(1, 1), (2, 1), (3, 1)]
