"""The demo behind `make demo`: runq's guarantees, shown on a live queue and checked.

    .venv/bin/python demo/demo.py [--database-url URL]     (default: $RUNQ_DATABASE_URL)

It changes nothing in a database it did not create: on the server the URL
names, it creates a fresh database runq_demo_<pid>, deploys runq there (with
sqitch if it is installed, else from sql/runq.sql with psql), sets that
database's runq.settings.backoff_base to 200 ms, and drops it at the end.

Then it starts three worker processes (``python -m runq.pool demo_handlers``,
the handlers in demo/demo_handlers.py) and, step by step, submits runs, kills
one worker with SIGKILL, freezes another with SIGSTOP, answers a question,
resubmits with an idempotency key, exhausts a run's attempts and redrives it,
kills the worker of a run with a budget, whose resumed attempt goes on
spending until the budget stops it, and kills (after starting a fourth
worker) the worker of a durable pydantic-ai agent inside a non-idempotent
tool call, whose resumed attempt replays its journal and finishes.
For each step it prints the guarantee, the runs' event timelines from
``runq.run_events`` (``type@epoch``, the ``run.`` prefix dropped) and checks
the evidence: exit 0 when every check holds, 1 when one does not, 2 on a usage
or connection error or when it cannot start (no database created or deployed,
a worker that does not come up).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from runq.agents.journal import UNKNOWN_OUTCOME
from runq.cli import table
from runq.client import Client
from runq.errors import IdempotencyConflict
from runq.types import Event, QueueStats, Run

__all__ = ["main"]

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LEASE = 2.0  # the workers' lease, seconds: a dead worker's run is free again after it
WORKER_ARGS = ["--slot", "0:1", "--slot", "0,10:2", "--slot", "20:1", "--lease", str(LEASE),
               "--poll", "0.2", "--sweep-every", "0.5", "--grace", "1"]
WORKERS = ("demo-w1", "demo-w2", "demo-w3")


class DemoError(Exception):
    """A step could not go on (a wait timed out)."""


def _json(value: Any) -> str:
    """One line of JSON; a Decimal as a string of its exact digits, or an int when whole."""
    def exact(v: Any) -> Any:
        return int(v) if isinstance(v, Decimal) and v == v.to_integral_value() else str(v)
    return json.dumps(value, separators=(", ", ": "), default=exact)


def _failure(run: Run) -> str:
    return _json({k: (run.failure or {}).get(k) for k in ("code", "message")})


def _ms(delta: timedelta) -> str:
    return f"{delta.total_seconds() * 1000:.0f} ms"


class Demo:
    def __init__(self, url: str, conn: psycopg.Connection[Any], logdir: Path) -> None:
        self.url = url
        self.conn = conn
        self.client = Client(conn)
        self.logdir = logdir
        self.tty = sys.stdout.isatty()
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.expected: dict[int, str] = {}  # run_id -> final status
        self.checks = self.failures = 0
        self.tag = f"{int(time.time()) % 100000}"  # sessions and keys unique per demo

    # -- output -----------------------------------------------------------------

    def step(self, title: str, guarantee: str) -> None:
        print(f"\n== {title}")
        print(textwrap.fill(guarantee, 96, initial_indent="   guarantee: ",
                            subsequent_indent=" " * 14))

    def say(self, text: str) -> None:
        print(textwrap.fill(text, 96, initial_indent="   ", subsequent_indent="     "))

    def check(self, ok: bool, text: str) -> None:
        self.checks += 1
        self.failures += not ok
        print(textwrap.fill(text, 96, initial_indent="   ok   " if ok else "   FAIL ",
                            subsequent_indent=" " * 8))

    def timeline(self, run_id: int, label: str = "") -> list[Event]:
        events = self.client.run_events(run_id)
        line = " ".join(f"{e.type.removeprefix('run.')}@{e.epoch}" for e in events)
        print(textwrap.fill(line, 96, initial_indent=f"   run {run_id}{label}: ",
                            subsequent_indent=" " * 8))
        return events

    def wait(self, what: str, until: Callable[[], T | None], timeout: float = 15.0) -> T:
        """Poll ``until`` until it returns something truthy, with a spinner
        on a terminal and plain lines otherwise."""
        start = time.monotonic()
        if not self.tty:  # CI: one plain line, finished when the wait is
            print(f"   ... waiting for {what}", end="", flush=True)
        for spin in itertools.cycle("|/-\\"):
            value = until()
            elapsed = time.monotonic() - start
            if value or elapsed > timeout:
                if self.tty:
                    sys.stdout.write(f"\r\033[K   ... waiting for {what}")
                print(f": {elapsed:.1f} s" if value else ": gave up", flush=True)
                if not value:
                    raise DemoError(f"gave up after {timeout:.0f} s waiting for {what}")
                return value
            if self.tty:
                sys.stdout.write(f"\r\033[K   {spin} waiting for {what} ({elapsed:.1f} s)")
                sys.stdout.flush()
            time.sleep(0.1)
        raise AssertionError("unreachable")

    # -- queue helpers ----------------------------------------------------------------

    def submit(self, kind: str, priority: int, payload: dict[str, Any] | None = None,
               expect: str = "succeeded", **kwargs: Any) -> int:
        run_id = self.client.submit("demo", kind, payload, priority=priority, **kwargs).run_id
        self.expected[run_id] = expect
        return run_id

    def run(self, run_id: int) -> Run:
        return self.client.get_run(run_id)

    def status_is(self, run_id: int, *statuses: str) -> Callable[[], Run | None]:
        def probe() -> Run | None:
            run = self.run(run_id)
            return run if run.status in statuses else None
        return probe

    def event(self, run_id: int, type_: str, epoch: int | None = None) -> Event | None:
        return next((e for e in self.client.run_events(run_id)
                     if e.type == type_ and (epoch is None or e.epoch == epoch)), None)

    def claimed_at(self, run_id: int) -> datetime:
        claim = self.event(run_id, "run.claimed", 1)
        assert claim is not None
        return claim.created_at

    # -- workers ----------------------------------------------------------------------

    def start_workers(self, *names: str) -> None:
        """Start worker processes (the demo's three when no name is given)
        and wait until every live one is connected and listening."""
        env = {**os.environ, "RUNQ_DATABASE_URL": self.url}
        started = names or WORKERS
        for name in started:
            with open(self.logdir / f"{name}.log", "wb") as log:
                # runq.pool imports the handlers' module from its working directory
                self.workers[name] = subprocess.Popen(
                    [sys.executable, "-m", "runq.pool", "demo_handlers", *WORKER_ARGS,
                     "--worker-id", name], stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, env=env, cwd=HERE)
        if not names:
            self.say(f"workers: python -m runq.pool demo_handlers {' '.join(WORKER_ARGS)}")
        self.say(", ".join(f"{n} pid {self.workers[n].pid}" for n in started))
        live = [n for n, proc in self.workers.items() if n in started or proc.poll() is None]

        def connected() -> bool:
            for name in live:
                if self.workers[name].poll() is not None:
                    raise DemoError(f"worker {name} exited with status "
                                    f"{self.workers[name].returncode}")
            row = self.conn.execute(
                "SELECT count(*) FILTER (WHERE application_name = 'runq-pool'),"
                "       count(*) FILTER (WHERE application_name = 'runq-pool-listen')"
                "  FROM pg_stat_activity WHERE datname = current_database()").fetchone()
            return row is not None and row[0] >= len(live) and row[1] >= len(live)
        self.wait("the workers to connect and LISTEN", connected)

    def owner(self, run_id: int, epoch: int) -> str:
        claim = self.event(run_id, "run.claimed", epoch)
        assert claim is not None
        return str(claim.payload.get("worker_id"))

    def worker(self, run_id: int) -> tuple[str, subprocess.Popen[bytes]]:
        """The demo's worker process holding the run's first epoch."""
        name = self.owner(run_id, 1)
        if name not in self.workers:
            raise DemoError(f"run {run_id} was claimed by {name}, not by a worker of this demo")
        return name, self.workers[name]

    def stop_workers(self) -> None:
        """Graceful where possible, SIGKILL otherwise; reaps every process."""
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def dump_logs(self) -> None:
        for name in self.workers:
            lines = (self.logdir / f"{name}.log").read_text(errors="replace").splitlines()
            print(f"--- last lines of {name}'s log", *lines[-15:], sep="\n", file=sys.stderr)

    # -- the steps ----------------------------------------------------------------------

    def priorities(self) -> None:
        self.step("1. Priority classes with reserved capacity",
                  "runs are claimed by class (0 interactive, 10 async, 20 maintenance), and a "
                  "slot reserved for class 0 takes an interactive run at once however much "
                  "async work is queued; maintenance has its own slot and never starves.")
        backlog = [self.submit("demo.chat", 10, {"seconds": 1.5}) for _ in range(10)]
        maintenance = self.submit("demo.chat", 20, {"seconds": 0.3})
        self.wait("the six 0,10 slots to be busy with async runs",
                  lambda: next((s for s in self.client.queue_stats()
                                if s.priority == 10 and s.running == 6), None))
        interactive = self.submit("demo.chat", 0, {"seconds": 0.1})
        self.say(f"submitted 10 async runs and maintenance run {maintenance}; with the async "
                 f"backlog still queued, submitted interactive run {interactive}")
        self.wait("every run of this step to succeed",
                  lambda: all(self.run(r).status == "succeeded"
                              for r in [*backlog, maintenance, interactive]), 20)
        self.timeline(interactive, " (interactive)")
        self.timeline(maintenance, " (maintenance)")
        latency = self.claimed_at(interactive) - self.run(interactive).created_at
        later = sum(self.claimed_at(r) > self.claimed_at(interactive) for r in backlog)
        self.check(latency < timedelta(seconds=1),
                   f"interactive run {interactive} was claimed {_ms(latency)} after its submit, "
                   f"by {self.owner(interactive, 1)}")
        self.check(later > 0, f"{later} of the 10 async runs submitted before it were claimed "
                              "after it (the backlog did not delay it)")
        m_latency = self.claimed_at(maintenance) - self.run(maintenance).created_at
        self.check(m_latency < timedelta(seconds=1),
                   f"maintenance run {maintenance} was claimed {_ms(m_latency)} after its "
                   "submit, by its reserved 20 slot")

    def sigkill(self) -> None:
        self.step("2. A worker killed mid-run (SIGKILL)",
                  "a dead worker's lease expires, a sweep requeues the run (policy resume, "
                  "with backoff) and another worker resumes it from its checkpoint at "
                  "epoch 2; tool calls the dead epoch had started come back retryable "
                  "(read-only, idempotent) or uncertain (non-idempotent), never as failed.")
        run_id = self.submit("demo.research", 10, {"hang": 60})
        self.wait(f"run {run_id} to start its tool calls",
                  lambda: sum(e.type == "run.tool_started"
                              for e in self.client.run_events(run_id)) >= 3)
        victim, proc = self.worker(run_id)
        proc.kill()
        proc.wait()
        self.say(f"sent SIGKILL to {victim} (pid {proc.pid}), which holds run "
                 f"{run_id} at epoch 1 with send_email and fetch_page started")
        run = self.wait(f"run {run_id} to be requeued, reclaimed and completed",
                        self.status_is(run_id, "succeeded", "failed"))
        events = self.timeline(run_id)
        requeued = self.event(run_id, "run.requeued", 1)
        self.check(requeued is not None and requeued.payload.get("reason") == "lease_expired",
                   f"the sweep requeued it: {_json(requeued and requeued.payload)}")
        self.check(run.status == "succeeded" and run.lease_epoch == 2
                   and self.owner(run_id, 2) != victim,
                   f"{self.owner(run_id, 2)} claimed it at epoch 2 and completed it "
                   f"(status {run.status})")
        calls = {c.call_id: c.status for c in self.client.tool_calls(run_id)}
        self.check(calls.get("search-1") == "finished" and calls.get("fetch-1") == "retryable"
                   and calls.get("email-1") == "uncertain"
                   and any(e.type == "run.tool_uncertain" and e.epoch == 1 for e in events),
                   f"runq.tool_calls: {_json(calls)}; resumed from checkpoint "
                   f"{_json((run.result or {}).get('resumed_from'))}")

    def sigstop(self) -> None:
        self.step("3. A worker frozen past its lease (SIGSTOP, then SIGCONT)",
                  "fencing: once a run is reclaimed, the old lease holder can write nothing; "
                  "its first write after waking is refused with false and logged once as "
                  "run.fenced with its old epoch.")
        run_id = self.submit("demo.slow", 10, {"hang": 60})
        self.wait(f"run {run_id} to checkpoint", lambda: self.event(run_id, "run.checkpointed"))
        frozen, proc = self.worker(run_id)
        proc.send_signal(signal.SIGSTOP)
        self.say(f"sent SIGSTOP to {frozen} (pid {proc.pid}), which holds run {run_id} "
                 "at epoch 1")
        try:
            self.wait(f"run {run_id} to be reclaimed and completed by another worker",
                      self.status_is(run_id, "succeeded", "failed"))
        finally:
            proc.send_signal(signal.SIGCONT)
        self.say(f"sent SIGCONT to {frozen}")
        self.wait(f"{frozen}'s first write to be fenced",
                  lambda: self.event(run_id, "run.fenced", 1))
        time.sleep(LEASE)  # three more heartbeat intervals (a third of the lease): silence
        events = self.timeline(run_id)
        reclaim = next(e for e in events if e.type == "run.claimed" and e.epoch == 2)
        stale = [e for e in events if e.epoch == 1 and e.event_id > reclaim.event_id]
        self.check(self.owner(run_id, 2) != frozen and self.run(run_id).status == "succeeded",
                   f"{self.owner(run_id, 2)} reclaimed it at epoch 2 and completed it")
        self.check([e.type for e in stale] == ["run.fenced"],
                   "after the reclaim, epoch 1 wrote nothing but run.fenced "
                   f"{_json(stale[0].payload) if stale else ''}")
        self.check(proc.poll() is None, f"{frozen} is alive and back at work on other runs")

    def ask_user(self) -> None:
        self.step("4. A run asks the user",
                  "a waiting run keeps its session's one active slot; the user's next submit "
                  "to that session is delivered to it as input (no second run), and the run "
                  "resumes with the input.")
        session = f"chat-{self.tag}"
        run_id = self.submit("demo.ask", 0, {"text": "book me a hotel"}, session_id=session)
        run = self.wait(f"run {run_id} to ask its question",
                        self.status_is(run_id, "waiting_for_user"))
        self.say(f"run {run_id} asks: {_json(run.question)}")
        answer = self.client.submit("demo", "demo.ask", {"city": "Lisbon"}, session_id=session,
                                    priority=0)
        self.check(answer.outcome == "input_delivered" and answer.run_id == run_id,
                   f"submit to session {session}: outcome {answer.outcome}, run {answer.run_id}")

        def resumed() -> Run | None:  # finished, or asking again at epoch 2
            run = self.run(run_id)
            return run if run.status != "queued" and run.lease_epoch > 1 \
                and run.status != "running" else None
        run = self.wait(f"run {run_id} to resume and complete", resumed)
        self.timeline(run_id)
        self.check(run.status == "succeeded" and run.result == {
            "booked_in": "Lisbon", "inputs": [{"city": "Lisbon"}]},
                   f"the claim at epoch 2 carried the input; result {_json(run.result)}"
                   if run.status == "succeeded" else f"the claim at epoch 2 came without the "
                   f"input: the run is {run.status} at epoch {run.lease_epoch}, asking again")

    def idempotency(self) -> None:
        self.step("5. Idempotent submission",
                  "the same idempotency key with the same request returns the original run "
                  "(duplicate) and changes nothing; with another request it is refused "
                  "(RQ001), never a second run.")
        key = f"order-{self.tag}"
        first = self.client.submit("demo", "demo.chat", {"order": 42}, priority=10,
                                   idempotency_key=key)
        again = self.client.submit("demo", "demo.chat", {"order": 42}, priority=10,
                                   idempotency_key=key)
        self.expected[first.run_id] = "succeeded"
        self.check(first.outcome == "created" and again.outcome == "duplicate"
                   and again.run_id == first.run_id,
                   f"key {key}: {first.outcome} run {first.run_id}, then {again.outcome} "
                   f"run {again.run_id}")
        try:
            self.client.submit("demo", "demo.chat", {"order": 43}, priority=10,
                               idempotency_key=key)
            self.check(False, "same key, another payload: accepted")
        except IdempotencyConflict as error:
            self.check(True, f"same key, another payload: IdempotencyConflict: {error}")
        self.wait(f"run {first.run_id} to succeed", self.status_is(first.run_id, "succeeded"))
        events = self.timeline(first.run_id)
        self.check(sum(e.type == "run.created" for e in events) == 1, "one run, created once")

    def dead_letter(self) -> None:
        self.step("6. The dead letter and redrive",
                  "a run whose lease expires max_attempts times is failed with code "
                  "max_attempts_exceeded, keeping its row and events; an operator's redrive "
                  "queues it again with its attempts reset. A failure a worker reports is "
                  "permanent: never retried.")
        run_id = self.submit("demo.flaky", 30, max_attempts=2)
        self.say(f"run {run_id}: class 30 (no pool serves it), max_attempts 2; this process "
                 "claims it with a 1 s lease and abandons it, twice")
        for attempt in (1, 2):
            claimed = self.wait(f"claim {attempt} of run {run_id}", lambda: self.client.claim(
                [30], worker_id="demo-abandoner", lease=timedelta(seconds=1)))
            self.wait(f"a worker's sweep to expire lease {claimed[0].epoch}",
                      self.status_is(run_id, "queued", "failed"))
        run = self.run(run_id)
        self.check(run.status == "failed" and run.failure is not None
                   and run.failure.get("code") == "max_attempts_exceeded",
                   f"dead-lettered: status {run.status}, failure {_failure(run)}")
        self.check(self.client.redrive(run_id, "demo: fixed the flaky dependency"),
                   f"runq.redrive({run_id}) -> true; attempts now {self.run(run_id).attempts}")
        claimed = self.wait(f"claim of the redriven run {run_id}", lambda: self.client.claim(
            [30], worker_id="demo-operator", lease=timedelta(seconds=5)))
        self.client.complete(run_id, claimed[0].epoch, {"redriven": True})
        self.timeline(run_id)
        run = self.run(run_id)
        self.check(run.status == "succeeded" and run.lease_epoch == 3,
                   f"completed at epoch {run.lease_epoch}")
        broken = self.submit("demo.broken", 10, expect="failed")
        run = self.wait(f"run {broken} (its handler raises) to fail",
                        self.status_is(broken, "failed", "succeeded"))
        events = self.timeline(broken, " (handler raises)")
        self.check(run.failure is not None and run.failure.get("code") == "ValueError"
                   and run.attempts == 1 and not any(e.type == "run.requeued" for e in events),
                   f"failed at once on attempt 1 of {run.max_attempts}, never requeued: "
                   f"failure {_failure(run)}")

    def ledger(self, run_id: int, epoch: int | None = None) -> dict[str, Decimal]:
        """The run's run.usage events (of one epoch, or all) summed per key
        in SQL, exactly: the ledger, read through runq.run_events."""
        rows = self.conn.execute(
            "SELECT u.key, sum(u.value::numeric) FROM runq.run_events(run_id => %s) AS e,"
            " LATERAL jsonb_each_text(e.payload) AS u"
            " WHERE e.type = 'run.usage' AND (e.epoch = %s OR %s::bigint IS NULL)"
            " GROUP BY u.key", [run_id, epoch, epoch]).fetchall()
        return {str(k): Decimal(v) for k, v in rows}

    def budget(self) -> None:
        self.step("7. A budget across a worker kill",
                  "usage is recorded in the run's ledger as it is spent, and spans every "
                  "attempt: a run resumed after its worker died sees on its claim what the "
                  "dead attempt spent, and begin_turn (written before each model call) fails "
                  "the run with budget_exhausted once a total has reached its limit.")
        budget = {"cost_usd": Decimal("0.05")}
        per_turn = {"cost_usd": Decimal("0.0125"), "input_tokens": 800}
        run_id = self.submit("demo.metered", 10, {**per_turn, "hang_after": 2, "hang": 60},
                             expect="failed", budget=budget)
        self.say(f"run {run_id}: budget {_json(budget)}; each turn a model call costing "
                 f"{_json(per_turn)}; the first attempt hangs after 2 turns")
        self.wait(f"run {run_id} to record the usage of 2 turns", lambda: sum(
            e.type == "run.checkpointed" for e in self.client.run_events(run_id)) >= 2)
        victim, proc = self.worker(run_id)
        spent = self.ledger(run_id, 1)
        proc.kill()
        proc.wait()
        self.say(f"sent SIGKILL to {victim} (pid {proc.pid}), which holds run {run_id} at "
                 f"epoch 1, having spent {_json(spent)}")
        run = self.wait(f"run {run_id} to be resumed and stopped by its budget",
                        self.status_is(run_id, "failed", "succeeded"))
        events = self.timeline(run_id)
        requeued = self.event(run_id, "run.requeued", 1)
        self.check(requeued is not None and requeued.payload.get("reason") == "lease_expired"
                   and run.lease_epoch == 2 and self.owner(run_id, 2) != victim,
                   f"the sweep requeued it ({_json(requeued and requeued.payload)}) and "
                   f"{self.owner(run_id, 2) if run.lease_epoch >= 2 else 'no worker'} resumed "
                   f"it at epoch {run.lease_epoch}")
        plan = next((c for c in self.client.tool_calls(run_id) if c.call_id == "plan-2"), None)
        seen = {k: Decimal(str(v)) for k, v in ((plan.args if plan else {})
                                                .get("spent_before") or {}).items()}
        self.check(plan is not None and seen == spent == {"cost_usd": Decimal("0.0250"),
                                                          "input_tokens": 800 * 2},
                   f"the resumed attempt's claim showed usage {_json(seen)}: what epoch 1's "
                   f"run.usage events sum to ({_json(spent)})")
        failure = run.failure or {}
        shown = {k: failure.get(k) for k in ("code", "message", "key", "limit", "total")}
        self.check(run.status == "failed" and failure.get("code") == "budget_exhausted"
                   and failure.get("key") == "cost_usd"
                   and Decimal(str(failure.get("limit"))) == budget["cost_usd"]
                   and Decimal(str(failure.get("total"))) >= budget["cost_usd"]
                   and failure.get("epoch") == 2,
                   f"begin_turn stopped it at epoch 2: status {run.status}, failure "
                   f"{_json(shown)}")
        ledger = self.ledger(run_id)
        turns = sum(e.type == "run.turn_started" for e in events)
        usages = sum(e.type == "run.usage" for e in events)
        self.check(run.usage == ledger == {"cost_usd": Decimal("0.0500"), "input_tokens": 800 * 4}
                   and turns == usages == 4,
                   f"runq.get_run usage {_json(run.usage)} equals the sum of its {usages} "
                   f"run.usage events {_json(ledger)}: {turns} turns, each one model call, "
                   "none begun once the total had reached the budget")
        def told() -> str:  # the handler's line in its worker's log, once it has written it
            log = "".join((self.logdir / f"{name}.log").read_text(errors="replace")
                          for name in self.workers)
            return next((line for line in log.splitlines()
                         if f"demo.metered run {run_id} epoch 2 stopped" in line), "")
        until = time.monotonic() + 5
        while not (stopped := told()) and time.monotonic() < until:
            time.sleep(0.1)
        self.check("budget_exhausted" in stopped,
                   f"the handler was told why (RunStopped.reason): {stopped.strip() or 'nothing'}")

    def agent(self) -> None:
        self.step("8. An agent killed mid-run resumes and finishes",
                  "a durable pydantic-ai agent (RunqDurability) replays the model requests an "
                  "earlier attempt journaled instead of sending them again, does not run again "
                  "a non-idempotent tool call cut off mid-way (the model is told its outcome is "
                  "unknown), and pays for each request once.")
        self.say("two of the three workers were killed above: starting a fourth")
        self.start_workers("demo-w4")
        run_id = self.submit("demo.agent", 10, {"prompt": "tell ann the weather", "hang": 60})
        self.say(f"run {run_id}: a scripted agent (no network): request 1 calls search "
                 "(read_only), request 2 calls send (non_idempotent), request 3 answers; "
                 "on epoch 1, send does its effect (an output chunk) and hangs")

        def in_send() -> bool:
            calls = {c.tool: c.status for c in self.client.tool_calls(run_id)}
            return calls.get("send") == "started" and any(
                isinstance(ch.chunk, dict) and "sent" in ch.chunk
                for ch in self.client.read_output(run_id))
        self.wait(f"run {run_id}'s agent to be inside send", in_send)
        victim, proc = self.worker(run_id)
        proc.kill()
        proc.wait()
        self.say(f"sent SIGKILL to {victim} (pid {proc.pid}), which holds run {run_id} at "
                 "epoch 1 inside send: started, its effect done, not ended")
        run = self.wait(f"run {run_id} to be requeued, reclaimed and finished",
                        self.status_is(run_id, "succeeded", "failed"), 20)
        self.timeline(run_id)
        result = run.result or {}
        self.check(run.status == "succeeded" and run.lease_epoch == 2
                   and self.owner(run_id, 2) != victim,
                   f"{self.owner(run_id, 2)} claimed it at epoch 2 and finished it "
                   f"(status {run.status})")
        journal = self.client.model_calls(run_id)
        self.check([(m.seq, m.epoch, m.applied) for m in journal]
                   == [(1, 1, True), (2, 1, True), (3, 2, True)]
                   and result.get("replayed") == 2 and result.get("sent") == 1,
                   "runq.model_calls: " + ", ".join(f"request {m.seq} at epoch {m.epoch}"
                                                    for m in journal)
                   + f": epoch 2 replayed {result.get('replayed')} (1 and 2, not sent again) "
                   f"and sent {result.get('sent')}")
        calls = {c.tool: (c.status, c.epoch) for c in self.client.tool_calls(run_id)}
        effects = [ch.epoch for ch in self.client.read_output(run_id)
                   if isinstance(ch.chunk, dict) and "sent" in ch.chunk]
        self.check(calls == {"search": ("finished", 1), "send": ("uncertain", 1)}
                   and effects == [1],
                   "runq.tool_calls: " + ", ".join(f"{t} {s} (begun at epoch {e})"
                                                   for t, (s, e) in calls.items())
                   + f"; send's effect (an output chunk) came at epochs {effects}: "
                   "it was not run again")
        answer = str(result.get("answer", ""))
        self.check(answer == f"done: {UNKNOWN_OUTCOME}",
                   f"the model was told send's outcome is unknown; its answer: "
                   f"{textwrap.shorten(answer, 90, placeholder=' ...')}")
        spent: dict[str, Decimal] = {}
        for m in journal:
            for key, value in (m.usage or {}).items():
                spent[key] = spent.get(key, Decimal(0)) + value
        self.check(run.usage == spent and run.usage.get("requests") == 3,
                   f"runq.get_run usage {_json(run.usage)} equals the sum of the journaled "
                   f"requests' usage {_json(spent)}: each request paid for once")

    def final_stats(self, before: Sequence[QueueStats]) -> None:
        self.step("9. Final runq.queue_stats",
                  "nothing is left running or waiting; the dead letter holds the run whose "
                  "handler raised and the run its budget stopped.")
        stats = self.client.queue_stats()
        fields = ["priority", "ready", "scheduled", "running", "waiting_for_user", "failed",
                  "oldest_ready_age"]
        text = table(fields, [[getattr(s, f) for f in fields] for s in stats])
        print(textwrap.indent(text if stats else "(no rows)", "   "))
        final = {r: self.run(r).status for r in self.expected}
        wrong = {r: s for r, s in final.items() if s != self.expected[r]}
        self.check(not wrong, f"all {len(final)} runs of this demo ended as expected"
                              + (f"; not these: {wrong}" if wrong else ""))

        def busy(rows: Sequence[QueueStats]) -> int:
            return sum(s.ready + s.running + s.waiting_for_user for s in rows)
        failed = sum(s.failed for s in stats) - sum(s.failed for s in before)
        want = sum(status == "failed" for status in self.expected.values())
        self.check(busy(stats) == busy(before) and failed == want,
                   f"queue_stats: {busy(stats)} ready, running or waiting; "
                   f"{failed} more in the dead letter")


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGTERM ends the demo like Ctrl-C, so the workers are still cleaned up."""
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _deploy(server: str, name: str) -> str:
    """Deploy runq into database name on the server; says how. sqitch records
    the changes; without it, psql runs the single-file install sql/runq.sql
    as a script (with ON_ERROR_STOP: it stops at the first error)."""
    bin_dir = os.environ.get("RUNQ_PG_BIN")  # scripts/pg sets it: `make demo` does
    psql = str(Path(bin_dir) / "psql") if bin_dir and (Path(bin_dir) / "psql").exists() \
        else "psql"
    env = {**os.environ, "PGOPTIONS": "-c client_min_messages=warning"}
    if shutil.which("sqitch"):
        command = ["sqitch", "deploy", "--quiet", "--client", psql, "--db-name", name,
                   "db:pg:" + server.split(":", 1)[1]]
        how = "with sqitch deploy"
    else:
        command = [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                   make_conninfo(server, dbname=name),
                   "-f", str(ROOT / "sql" / "runq.sql")]
        how = "from sql/runq.sql (no sqitch here)"
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    except OSError as error:
        raise DemoError(f"cannot run {command[0]}: {error}") from None
    if proc.returncode != 0:
        raise DemoError(f"{command[0]} exited {proc.returncode}: {proc.stderr.strip()}")
    return how


def _drop(admin: psycopg.Connection[Any], name: str) -> bool:
    """Drop the demo's database; False when its workers were still connected.
    A plain DROP DATABASE waits up to 5 s for other sessions to leave, then
    fails: the demo forces it then, so that it leaves nothing behind."""
    drop = sql.SQL("DROP DATABASE {}").format(sql.Identifier(name))
    try:
        admin.execute(drop)
        return True
    except psycopg.errors.ObjectInUse:
        admin.execute(drop + sql.SQL(" WITH (FORCE)"))
        return False


def _show(url: str, started: float) -> int:
    """The steps, on the demo's database with runq deployed; the exit status."""
    try:
        conn = psycopg.connect(url, autocommit=True, application_name="runq-demo")
    except psycopg.OperationalError as error:
        print(f"demo: cannot connect: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    with conn, tempfile.TemporaryDirectory(prefix="runq-demo-") as logdir, _interruptible():
        demo = Demo(url, conn, Path(logdir))
        try:
            conn.execute("UPDATE runq.settings SET backoff_base = interval '200 ms'")
            demo.say("runq.settings: backoff_base 200 ms (in the demo's database); worker "
                     f"leases {LEASE:.0f} s, sweeps every 0.5 s. Timelines: runq.run_events "
                     "as type@epoch.")
            before = demo.client.queue_stats()
            demo.start_workers()
            for step in (demo.priorities, demo.sigkill, demo.sigstop, demo.ask_user,
                         demo.idempotency, demo.dead_letter, demo.budget, demo.agent):
                step()
            demo.final_stats(before)
        except (DemoError, AssertionError, psycopg.Error) as error:
            demo.failures += 1
            first_line = (str(error).splitlines() or [""])[0]
            print(f"\ndemo: {type(error).__name__}: {first_line}", file=sys.stderr)
        except KeyboardInterrupt:
            print("\ndemo: interrupted", file=sys.stderr)
            return 130
        finally:
            demo.stop_workers()
            if demo.failures:
                demo.dump_logs()
    elapsed = time.monotonic() - started
    if demo.failures and not demo.checks:
        return 2  # it could not even start: a worker did not start
    if demo.failures:
        print(f"\nFAILED: {demo.failures} of {demo.checks} checks did not hold "
              f"({elapsed:.1f} s)")
        return 1
    print(f"\nAll {demo.checks} checks held, in {elapsed:.1f} s.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Show runq's guarantees on a live queue, in a database of its own, and
    check them (see the module)."""
    ap = argparse.ArgumentParser(prog="demo/demo.py", description=main.__doc__)
    ap.add_argument("--database-url", default=os.environ.get("RUNQ_DATABASE_URL"),
                    help="a superuser URL of the server, where the demo creates its database")
    opts = ap.parse_args(argv)
    if not opts.database_url:
        print("demo: no server: pass --database-url or set RUNQ_DATABASE_URL", file=sys.stderr)
        return 2
    started = time.monotonic()
    name = f"runq_demo_{os.getpid()}"
    try:
        admin = psycopg.connect(opts.database_url, autocommit=True,
                                application_name="runq-demo")
    except psycopg.OperationalError as error:
        print(f"demo: cannot connect: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    with admin:
        try:
            admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(
                sql.Identifier(name)))
        except psycopg.Error as error:
            print(f"demo: cannot create database {name}: {' '.join(str(error).split())}",
                  file=sys.stderr)
            return 2
        version = admin.info.server_version
        print(f"runq demo in database {name} at {admin.info.host}:{admin.info.port} "
              f"(PostgreSQL {version // 10000}.{version % 100}), created for it and dropped "
              "at the end")
        try:
            try:
                how = _deploy(opts.database_url, name)
            except DemoError as error:
                print(f"demo: cannot deploy runq: {error}", file=sys.stderr)
                return 2
            print(f"   runq deployed {how}")
            status = _show(make_conninfo(opts.database_url, dbname=name), started)
        finally:
            dropped = _drop(admin, name)
    if not dropped:
        print(f"\nFAILED: the demo's workers were still connected to {name} at the end")
    return status or (0 if dropped else 1)


if __name__ == "__main__":
    sys.exit(main())
