"""The model check: a Hypothesis state machine against a small
pure-Python model of docs/contract.md, on a real database.

Each step calls one of runq's public functions: submit (with idempotency keys;
routed to a session's waiting run), claim (sometimes by kind: only runs of the
kinds named, a subset of chat.turn and batch, repeats allowed), heartbeat,
checkpoint, begin_turn, begin_tool, end_tool, complete, fail, ask_user,
release, cancel, deliver_input, redrive, sweep, or a call that must be
refused (RQ003, 22023). Four sessions (two tenants, and the NULL session);
workers holding (run_id, epoch) handles that are live, stale or forged (the
run's epoch - 1 or + 1, 0, -1, the least or the largest bigint); recovery
policies resume, fail and zero_work; max_attempts 1 to 3; classes 0, 10, 20;
kinds chat.turn and batch; scheduled_for NULL, past or far future; queue_ttl
NULL or one hour.

Time passes as test setup, never by waiting:
  * a lease lapses when the test moves its lease_expires_at into the past, or
    because it was claimed for 1 ms (a sweep then sleeps 2 ms first);
  * a queue_ttl runs out when the test moves expires_at into the past;
  * the sweep's backoff is one microsecond (runq.settings), so a requeued run
    is claimable at the next step, in scheduled_for order.

Every step compares what the call returned (true/false, outcome, claimed rows
with epoch, attempt, resumed, checkpoint and inputs, sweep actions, the
SQLSTATE) with the model. After every step an invariant compares the whole
database, read through runq.get_run, runq.tool_calls and runq.run_events, with
the model: each run's status, attempts, epoch, cancel flag, failure code and
message, question, result, schedule and finished_at; each tool call's status
and epoch; per run, the count of every event type (a double terminal
transition, a second run.fenced for one epoch, a missing event all show); and
the idempotency keys. So a rejected call that changed something shows too.

The model keeps the contract's finer rules too, those a reader might have
guessed otherwise: claim order within a class is coalesce(scheduled_for,
created_at), then run_id ("Claim order"), with or without kinds; a worker call
under an epoch the run never had (negative, or above its current epoch)
answers false, changes nothing and logs nothing, not even run.fenced, while
one the run had and lost (0 included, also on a run never claimed) logs its
one run.fenced; one sweep decides a run once (a run it requeues is not also
expired by queue_ttl in that sweep); bad arguments are refused (22023) before
the fence, and the fence before end_tool's "never began" 22023; begin_tool may
reuse the call_id of a retryable or uncertain call, or of a started one in the
same epoch (else RQ004); calls left started are resolved (retryable or
uncertain) whenever a lease ends by expiry, release or a worker observing the
cancel, not by complete, fail or ask_user; redrive clears scheduled_for and
the cancel flag and opens a fresh queue_ttl window; a second cancel of a
running run answers cancel_requested and logs nothing.

A failure's message shows the example as a numbered story of calls and
answers. 200 examples of 30 steps in CI; RUNQ_SOAK=1 runs 5,000 of 50.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)
from psycopg.types.json import Jsonb

SOAK = os.environ.get("RUNQ_SOAK") == "1"
EXAMPLES = 5000 if SOAK else 200
STEPS = 50 if SOAK else 30

# Between examples. DELETE, not TRUNCATE: the tables hold a few dozen rows,
# and TRUNCATE's new relfilenodes cost ~0.25 s an example on a busy server.
# The model never predicts a run_id (it learns each from submit), so identity
# need not restart.
RESET = ("DELETE FROM runq.run_events; DELETE FROM runq.inputs; DELETE FROM runq.checkpoints;"
         " DELETE FROM runq.tool_calls; DELETE FROM runq.idempotency_keys; DELETE FROM runq.run_usage;"
         " DELETE FROM runq.runs")
# (tenant, session); the NULL session twice: it never blocks a submit.
SESSIONS: list[tuple[str, str | None]] = [("acme", None), ("acme", "s1"), ("acme", "s2"),
                                          ("beta", "s1"), ("acme", None)]
PAST = datetime(2000, 1, 1, tzinfo=UTC)
FUTURE = datetime(2999, 1, 1, tzinfo=UTC)
SCHEDULES: dict[str, datetime | None] = {"none": None, "past": PAST, "future": FUTURE}
TTL = timedelta(hours=1)
LONG_LEASE = timedelta(hours=1)
SHORT_LEASE = timedelta(milliseconds=1)
NON_TERMINAL = ("queued", "running", "waiting_for_user")
TERMINAL = ("succeeded", "failed", "cancelled")
CLASS_SETS = [[0, 10, 20], [0], [10], [20], [0, 10], [10, 20], [0, 10, 20], [0, 10, 20]]
IDEMPOTENCY = ("read_only", "idempotent", "non_idempotent")
MISSING = 10**12  # a run_id that never exists
MAX_EPOCH = 2**63 - 1  # the largest and least bigint, epochs no run ever has
MIN_EPOCH = -2**63
# What a claim may name as kinds: mostly nothing (every kind), else a subset
# of the kinds submitted, a repeated kind included.
KINDS: list[list[str] | None] = [None, None, None, None, ["chat.turn"], ["batch"],
                                 ["batch", "chat.turn"], ["chat.turn", "chat.turn"]]
# What a step does, weighted by repetition: a run's life is mostly worker calls.
# What a step may do, with weights. Worker calls weigh more while some worker
# holds a live lease (a run's life is mostly worker calls) and claims while a
# run is ready, so that runs get far into their lives; without a live lease
# worker calls still happen, with stale and forged handles.
WORKER_OPS = {"heartbeat": 2, "checkpoint": 2, "begin_turn": 2, "begin_tool": 3, "end_tool": 2,
              "complete": 1, "fail": 1, "ask_user": 1, "release": 1}
# The natural next step while a worker holds a live lease, in turn.
LIFE = ["begin_tool", "heartbeat", "lease_lapses", "sweep", "begin_turn", "checkpoint",
        "end_tool", "release", "begin_tool", "cancel", "ask_user", "complete", "fail"]
OTHER_OPS = {"submit": 3, "resubmit": 1, "claim": 2, "cancel": 1, "deliver_input": 2,
             "redrive": 1, "rejected": 1, "lease_lapses": 2, "queue_ttl_runs_out": 1, "sweep": 3}
# (SQLSTATE, call) for calls refused whatever the state of the queue
REJECTED = [
    ("RQ003", "SELECT runq.heartbeat(run_id => %s, epoch => 1)"),
    ("RQ003", "SELECT runq.complete(run_id => %s, epoch => 1)"),
    ("RQ003", "SELECT runq.release(run_id => %s, epoch => 1)"),
    ("RQ003", "SELECT runq.ask_user(run_id => %s, epoch => 1, question => '{}')"),
    ("RQ003", "SELECT runq.begin_turn(run_id => %s, epoch => -1)"),
    ("RQ003", "SELECT runq.checkpoint(run_id => %s, epoch => 9223372036854775807, state => '{}')"),
    ("RQ003", "SELECT runq.cancel(run_id => %s)"),
    ("RQ003", "SELECT runq.deliver_input(run_id => %s, input => '{}')"),
    ("RQ003", "SELECT runq.redrive(run_id => %s)"),
    ("22023", "SELECT * FROM runq.claim(classes => '{}')"),
    ("22023", "SELECT * FROM runq.claim(classes => NULL)"),
    ("22023", "SELECT * FROM runq.claim(classes => '{0}', max_runs => 0)"),
    ("22023", "SELECT * FROM runq.claim(classes => '{40000}')"),
    ("22023", "SELECT * FROM runq.claim(classes => '{0, 10, 20}', kinds => '{}')"),
    ("22023", "SELECT * FROM runq.claim(classes => '{0, 10, 20}', kinds => '{chat.turn,NULL}')"),
    ("22023", "SELECT * FROM runq.claim(classes => '{0, 10}', kinds => '{{chat.turn},{batch}}')"),
    ("22023", "SELECT * FROM runq.sweep(max_runs => 0)"),
    ("22023", ("SELECT * FROM runq.submit(tenant_id => 'acme', kind => 'k', session_id => 's1',"
               " recovery_policy => 'retry')")),
    ("22023", ("SELECT * FROM runq.submit(tenant_id => 'acme', kind => 'k', session_id => 's1',"
               " max_attempts => 0)")),
    ("22023", "SELECT * FROM runq.submit(tenant_id => 'acme', kind => 'k', payload => '[]')"),
    ("22023", "SELECT * FROM runq.submit(tenant_id => 'acme', kind => 'k', priority => 32768)"),
    ("22023", ("SELECT * FROM runq.submit(tenant_id => 'acme', kind => 'k', idempotency_key => 'k1',"
               " queue_ttl => '-1 second')")),
    ("22023", "SELECT runq.fail(run_id => %s, epoch => %s, failure => '{\"message\": \"no code\"}')"),
    ("22023", "SELECT runq.fail(run_id => %s, epoch => %s, failure => '\"oops\"')"),
    ("22023", ("SELECT runq.begin_tool(run_id => %s, epoch => %s, call_id => 'x', tool => 't',"
               " idempotency => 'maybe')")),
    ("22023", ("SELECT runq.begin_tool(run_id => %s, epoch => %s, call_id => 'x', tool => 't',"
               " idempotency => 'read_only', args => NULL)")),
    ("22023", "SELECT runq.checkpoint(run_id => %s, epoch => %s, state => NULL)"),
    ("22023", "SELECT runq.ask_user(run_id => %s, epoch => %s, question => NULL)"),
    ("22023", "SELECT runq.end_tool(run_id => %s, epoch => %s, call_id => 'x', outcome => NULL)"),
]
EVENT_TYPES = ("run.created", "run.claimed", "run.checkpointed", "run.turn_started",
               "run.tool_started", "run.tool_finished", "run.tool_uncertain",
               "run.waiting_for_user", "run.input_delivered", "run.succeeded", "run.failed",
               "run.cancel_requested", "run.cancelled", "run.requeued", "run.fenced",
               "run.redriven")


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

@dataclass
class Call:
    idempotency: str
    status: str  # started | finished | retryable | uncertain
    epoch: int


@dataclass
class Run:
    run_id: int
    tenant: str
    session: str | None
    kind: str
    priority: int
    policy: str
    max_attempts: int
    has_ttl: bool
    payload: dict[str, Any]
    created_t: int
    # 'none' | 'past' | 'future' | 'backoff' (set by a sweep requeue at backoff_t)
    sched: str
    backoff_t: int = 0
    status: str = "queued"
    attempts: int = 0
    epoch: int = 0
    cancel: bool = False
    failure_code: str | None = None
    failure_message: str | None = None  # None: any non-empty string will do
    question: Any = None
    result: Any = None
    did_work: bool = False
    ttl_expired: bool = False
    lease_forced: bool = False  # lease_expires_at moved into the past by the test
    lease_short: bool = False   # claimed with a 1 ms lease
    checkpoint: tuple[int, Any] | None = None  # (progress seq, state)
    inputs: list[tuple[int, Any]] = field(default_factory=list)
    calls: dict[str, Call] = field(default_factory=dict)
    fenced: set[int] = field(default_factory=set)
    events: Counter[str] = field(default_factory=Counter)

    def claimable(self) -> bool:
        return self.status == "queued" and self.sched != "future"

    def order_key(self) -> tuple[int, int, int, int]:
        """ORDER BY priority, coalesce(scheduled_for, created_at), run_id, with
        the model's step counter standing in for the clock."""
        if self.sched == "past":
            ready = (0, 0)
        elif self.sched == "backoff":
            ready = (1, self.backoff_t)
        else:
            ready = (1, self.created_t)
        return (self.priority, *ready, self.run_id)


@dataclass(frozen=True)
class Handle:
    """What a worker holds: a run and the epoch it was claimed under."""
    run_id: int
    epoch: int
    worker: str


@dataclass(frozen=True)
class Request:
    tenant: str
    principal: str | None
    key: str | None
    kind: str
    payload: tuple[tuple[str, int], ...]
    session: str | None
    priority: int
    sched: str
    max_attempts: int
    policy: str
    ttl: bool

    def __str__(self) -> str:
        return (f"(tenant {self.tenant}, session {self.session}, principal {self.principal},"
                f" key {self.key}, {self.kind} {dict(self.payload)}, priority {self.priority},"
                f" scheduled {self.sched}, max_attempts {self.max_attempts}, {self.policy},"
                f" queue_ttl {'1 hour' if self.ttl else None})")

    def digest(self) -> tuple[Any, ...]:
        """The request hash's fields (tenant and principal scope the key instead)."""
        return (self.kind, self.payload, self.session, self.priority, self.sched,
                self.max_attempts, self.policy, self.ttl)


Outcome = tuple[Any, str | None]  # (returned value, SQLSTATE raised)

# A new request's fields but its tenant and session. Each list starts with
# the value Hypothesis draws most (all zeros is its favourite example).
REQUESTS = st.fixed_dictionaries({
    "principal": st.sampled_from([None, "p1"]),
    "key": st.sampled_from([None, None, None, "k1", "k2"]),
    "kind": st.sampled_from(["chat.turn", "batch"]),
    "payload": st.sampled_from([(), (("n", 1),), (("n", 2),)]),
    "priority": st.sampled_from([0, 10, 20]),
    "sched": st.sampled_from(["none", "none", "none", "past", "past", "future"]),
    "max_attempts": st.sampled_from([3, 2, 1]),
    "policy": st.sampled_from(["resume", "fail", "zero_work"]),
    "ttl": st.booleans(),
})

# How a reused idempotency key's request may differ from the original one.
CHANGES: dict[str, Callable[[Request], dict[str, Any]]] = {
    "kind": lambda q: {"kind": "other.kind"},
    "payload": lambda q: {"payload": (("n", 99),)},
    "priority": lambda q: {"priority": (q.priority + 10) % 30},
    "sched": lambda q: {"sched": "future" if q.sched != "future" else "none"},
    "max_attempts": lambda q: {"max_attempts": q.max_attempts % 3 + 1},
    "policy": lambda q: {"policy": "fail" if q.policy != "fail" else "resume"},
    "ttl": lambda q: {"ttl": not q.ttl},
    "session": lambda q: {"session": "s2" if q.session != "s2" else "s1"},
}

# The invariant's reads, through the public functions where there is one.
# scheduled_for is read as the model's names for it.
READ_RUNS = """
SELECT g.run_id, g.tenant_id, g.session_id, g.kind, g.status, g.priority, g.attempts,
       g.max_attempts,
       CASE WHEN g.scheduled_for IS NULL THEN 'none'
            WHEN g.scheduled_for = '2000-01-01 00:00:00+00' THEN 'past'
            WHEN g.scheduled_for = '2999-01-01 00:00:00+00' THEN 'future'
            WHEN g.scheduled_for > g.created_at THEN 'backoff'
            ELSE g.scheduled_for::text END,
       g.lease_epoch, g.cancel_requested, g.result, g.failure, g.question,
       g.finished_at IS NOT NULL
  FROM runq.runs AS r CROSS JOIN LATERAL runq.get_run(r.run_id) AS g
 ORDER BY g.run_id"""
READ_CALLS = """
SELECT r.run_id, t.call_id, t.idempotency, t.status, t.epoch
  FROM runq.runs AS r CROSS JOIN LATERAL runq.tool_calls(r.run_id) AS t"""
READ_EVENTS = """
SELECT r.run_id, e.type, count(*), count(DISTINCT e.epoch)
  FROM runq.runs AS r CROSS JOIN LATERAL runq.run_events(r.run_id) AS e
 GROUP BY r.run_id, e.type"""
READ_KEYS = "SELECT tenant_id, principal_id, idempotency_key, run_id FROM runq.idempotency_keys"
SEEN: Counter[str] = Counter()  # what the steps exercised, over all examples


class Model:
    def __init__(self) -> None:
        self.runs: dict[int, Run] = {}
        self.keys: dict[tuple[str, str | None, str], tuple[Request, int]] = {}
        self.t = 0    # logical clock: one tick per step
        self.seq = 0  # stands in for runq.progress_seq (checkpoints and inputs)

    def tick(self) -> None:
        self.t += 1

    # ---- helpers
    def active_in_session(self, tenant: str, session: str | None) -> Run | None:
        if session is None:
            return None
        for r in self.runs.values():
            if r.tenant == tenant and r.session == session and r.status in NON_TERMINAL:
                return r
        return None

    def resolve_calls(self, r: Run) -> None:
        for c in r.calls.values():
            if c.status == "started":
                if c.idempotency == "non_idempotent":
                    c.status = "uncertain"
                    r.events["run.tool_uncertain"] += 1
                else:
                    c.status = "retryable"

    def end_lease(self, r: Run) -> None:
        r.lease_forced = False
        r.lease_short = False

    def terminal(self, r: Run, status: str, code: str | None = None,
                 message: str | None = None) -> None:
        r.status = status
        self.end_lease(r)
        if status == "failed":
            r.failure_code = code
            r.failure_message = message
            r.events["run.failed"] += 1
        elif status == "cancelled":
            r.events["run.cancelled"] += 1
        else:
            r.events["run.succeeded"] += 1
        r.question = None

    def deliver(self, r: Run, value: Any) -> None:
        r.status = "queued"
        r.attempts = 0
        r.question = None
        self.seq += 1
        r.inputs.append((self.seq, value))
        r.events["run.input_delivered"] += 1

    def expire_lease(self, r: Run, released: bool) -> str:
        """The lease-expiry path (sweep, or release with released=True)."""
        self.resolve_calls(r)
        if r.cancel:
            action = "cancelled"
            self.terminal(r, "cancelled")
        elif not released and r.attempts >= r.max_attempts:
            action = "dead_lettered"
            self.terminal(r, "failed", "max_attempts_exceeded")
        elif r.policy == "fail" or (r.policy == "zero_work" and (r.did_work or r.ttl_expired)):
            action = "orphaned"
            self.terminal(r, "failed", "orphaned")
        else:
            action = "requeued"
            r.status = "queued"
            self.end_lease(r)
            r.events["run.requeued"] += 1
            if not released and r.policy == "resume":
                r.sched, r.backoff_t = "backoff", self.t
            else:
                r.sched = "none"
        if released:
            r.attempts -= 1
        return action

    # ---- submitters
    def submit(self, q: Request, new_run_id: int | None) -> Outcome:
        if q.key is not None:
            scope = (q.tenant, q.principal, q.key)
            if scope in self.keys:
                original, run_id = self.keys[scope]
                if original.digest() == q.digest():
                    return (run_id, "duplicate"), None
                return None, "RQ001"
        active = self.active_in_session(q.tenant, q.session)
        if active is not None and active.status == "waiting_for_user":
            self.deliver(active, dict(q.payload))
            result = (active.run_id, "input_delivered")
        elif active is not None:
            return None, "RQ002"
        else:
            if new_run_id is None or new_run_id in self.runs:
                return ("a new run", "created"), None  # runq did not create one: the step fails
            r = Run(run_id=new_run_id, tenant=q.tenant, session=q.session, kind=q.kind,
                    priority=q.priority, policy=q.policy, max_attempts=q.max_attempts,
                    has_ttl=q.ttl, payload=dict(q.payload), created_t=self.t, sched=q.sched)
            r.events["run.created"] += 1
            self.runs[new_run_id] = r
            result = (new_run_id, "created")
        if q.key is not None:
            self.keys[(q.tenant, q.principal, q.key)] = (q, result[0])
        return result, None

    def cancel(self, run_id: int) -> Outcome:
        r = self.runs.get(run_id)
        if r is None:
            return None, "RQ003"
        if r.status in ("queued", "waiting_for_user"):
            self.terminal(r, "cancelled")
            return "cancelled", None
        if r.status == "running":
            if not r.cancel:
                r.cancel = True
                r.events["run.cancel_requested"] += 1
            return "cancel_requested", None
        return "already_terminal", None

    def deliver_input(self, run_id: int, value: Any) -> Outcome:
        r = self.runs.get(run_id)
        if r is None:
            return None, "RQ003"
        if r.status != "waiting_for_user":
            return None, "RQ004"
        self.deliver(r, value)
        return True, None

    def redrive(self, run_id: int) -> Outcome:
        r = self.runs.get(run_id)
        if r is None:
            return None, "RQ003"
        if r.status != "failed":
            return None, "RQ004"
        if self.active_in_session(r.tenant, r.session) is not None:
            return None, "RQ002"
        r.status = "queued"
        r.attempts = 0
        r.failure_code = r.failure_message = None
        r.sched = "none"
        r.cancel = False
        r.ttl_expired = False  # a fresh queue_ttl window
        r.events["run.redriven"] += 1
        return True, None

    # ---- workers
    def claim(self, classes: list[int], kinds: list[str] | None, max_runs: int,
              short: bool) -> list[tuple[Any, ...]]:
        ready = sorted((r for r in self.runs.values()
                        if r.claimable() and r.priority in classes
                        and (kinds is None or r.kind in kinds)),
                       key=Run.order_key)[:max_runs]
        rows = []
        for r in ready:
            r.status = "running"
            r.epoch += 1
            r.attempts += 1
            r.lease_forced = False
            r.lease_short = short
            r.events["run.claimed"] += 1
            checkpoint = r.checkpoint[1] if r.checkpoint else None
            after = r.checkpoint[0] if r.checkpoint else 0
            inputs = [v for s, v in r.inputs if s > after]
            rows.append((r.run_id, r.epoch, r.attempts, r.epoch > 1, checkpoint, inputs,
                         r.payload, r.session, r.priority, r.kind))
        return rows

    def worker(self, h: Handle, honours_cancel: bool) -> tuple[Run | None, Outcome | None]:
        """The fence shared by every worker function: (run, None) when the
        write applies, else (None, what the refused call answers)."""
        r = self.runs.get(h.run_id)
        if r is None:
            return None, (None, "RQ003")
        if h.epoch < 0 or h.epoch > r.epoch:
            # an epoch the run never had: false, and not even a run.fenced
            SEEN["(worker calls under an epoch the run never had)"] += 1
            return None, (False, None)
        if r.status == "running" and r.epoch == h.epoch:
            if not (honours_cancel and r.cancel):
                return r, None
            # ours, but cancel was requested: the run becomes cancelled now
            self.resolve_calls(r)
            self.terminal(r, "cancelled")
            return None, (False, None)
        r.fenced.add(h.epoch)
        return None, (False, None)

    def heartbeat(self, h: Handle) -> Outcome:
        r, refused = self.worker(h, True)
        if r is None:
            assert refused is not None
            return refused
        r.lease_forced = False  # extended by its own length from now
        return True, None

    def checkpoint(self, h: Handle, state: Any) -> Outcome:
        r, refused = self.worker(h, True)
        if r is None:
            assert refused is not None
            return refused
        self.seq += 1
        r.checkpoint = (self.seq, state)
        r.events["run.checkpointed"] += 1
        return True, None

    def begin_turn(self, h: Handle) -> Outcome:
        r, refused = self.worker(h, True)
        if r is None:
            assert refused is not None
            return refused
        r.did_work = True
        r.events["run.turn_started"] += 1
        return True, None

    def begin_tool(self, h: Handle, call_id: str, idempotency: str) -> Outcome:
        r, refused = self.worker(h, True)
        if r is None:
            assert refused is not None
            return refused
        c = r.calls.get(call_id)
        if c is not None and not (c.status in ("retryable", "uncertain")
                                  or (c.status == "started" and c.epoch == h.epoch)):
            return None, "RQ004"
        r.calls[call_id] = Call(idempotency, "started", h.epoch)
        r.did_work = True
        r.events["run.tool_started"] += 1
        return True, None

    def end_tool(self, h: Handle, call_id: str) -> Outcome:
        r, refused = self.worker(h, False)
        if r is None:
            assert refused is not None
            return refused
        c = r.calls.get(call_id)
        if c is None:
            return None, "22023"
        if c.status != "started":
            return None, "RQ004"
        c.status = "finished"
        r.events["run.tool_finished"] += 1
        return True, None

    def complete(self, h: Handle, result: Any) -> Outcome:
        r, refused = self.worker(h, False)
        if r is None:
            assert refused is not None
            return refused
        self.terminal(r, "succeeded")
        r.result = result
        return True, None

    def fail(self, h: Handle, code: str, message: str | None) -> Outcome:
        r, refused = self.worker(h, False)
        if r is None:
            assert refused is not None
            return refused
        self.terminal(r, "failed", code, message if message is not None else code)
        return True, None

    def ask_user(self, h: Handle, question: Any) -> Outcome:
        r, refused = self.worker(h, True)
        if r is None:
            assert refused is not None
            return refused
        r.status = "waiting_for_user"
        r.question = question
        self.end_lease(r)
        r.events["run.waiting_for_user"] += 1
        return True, None

    def release(self, h: Handle) -> Outcome:
        r, refused = self.worker(h, False)
        if r is None:
            assert refused is not None
            return refused
        self.expire_lease(r, released=True)
        return True, None

    # ---- operators
    def sweep(self) -> list[tuple[int, str]]:
        actions = []
        for r in sorted(self.runs.values(), key=lambda r: r.run_id):
            if r.status == "running" and (r.lease_forced or r.lease_short):
                actions.append((r.run_id, self.expire_lease(r, released=False)))
        decided = {run_id for run_id, _ in actions}  # one sweep decides a run once
        for r in sorted(self.runs.values(), key=lambda r: r.run_id):
            if r.status == "queued" and r.ttl_expired and r.run_id not in decided:
                self.terminal(r, "failed", "queue_ttl_expired")
                actions.append((r.run_id, "expired"))
        return sorted(actions)


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------

def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


class RunqMachine(RuleBasedStateMachine):
    """One rule, `step`, draws what to do (OTHER_OPS, WORKER_OPS: weighted,
    among the operations that can apply), then draws the operation's arguments
    from the model's state: mostly something that applies (a live handle, a
    waiting run for deliver_input, a failed one for redrive), sometimes
    anything (stale and forged handles, runs in the wrong status). One rule
    rather than one per operation: Hypothesis's swarm testing switches rules
    off at random per example, which mostly broke the submit -> claim -> work
    chain every interesting state needs."""

    conn: psycopg.Connection[Any]  # set by the test, one per test function

    def __init__(self) -> None:
        super().__init__()
        self.conn.execute(RESET)
        self.model = Model()
        self.handles: list[Handle] = []  # every handle a worker ever held
        self.next_call = 0
        self.live_steps = 0
        self.trace: list[str] = []  # what this example did, for a failure's message

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        m = self.model
        live = any(map(self.live, self.handles))
        weights = dict(OTHER_OPS)
        if not m.keys:
            del weights["resubmit"]
        if not m.runs:
            for op in ("cancel", "deliver_input", "redrive"):
                del weights[op]
        if not any(r.status == "running" for r in m.runs.values()):
            del weights["lease_lapses"]
        if not any(r.has_ttl and not r.ttl_expired for r in m.runs.values()):
            del weights["queue_ttl_runs_out"]
        ready = any(r.claimable() for r in m.runs.values())
        if ready:
            weights["claim"] += 4
        if m.runs:
            weights.update({op: w * 3 if live else 1 for op, w in WORKER_OPS.items()})
        # Hypothesis draws the first choice more often than the others (it is
        # where it shrinks to): make that a natural next step of a run's life.
        if live:  # counted in live steps only, so that shrinking elsewhere keeps it
            first = LIFE[self.live_steps % len(LIFE)]
            self.live_steps += 1
        elif ready:
            first = "claim"
        elif any(r.status == "waiting_for_user" for r in m.runs.values()):
            first = "deliver_input"
        else:
            first = "submit"
        menu = [op for op in [first, *weights] for _ in range(weights.pop(op, 0))]
        op = data.draw(st.sampled_from(menu), label="op")
        m.tick()
        getattr(self, f"do_{op}")(data)

    # ---- plumbing
    def call(self, query: str, params: Any = None) -> tuple[list[tuple[Any, ...]] | None,
                                                           str | None]:
        try:
            return self.conn.execute(query, params).fetchall(), None
        except psycopg.Error as e:
            return None, e.sqlstate

    def scalar(self, query: str, params: Any = None) -> Outcome:
        rows, state = self.call(query, params)
        return (rows[0][0] if rows else None), state

    def expect(self, what: str, got: Outcome, want: Outcome) -> None:
        self.trace.append(f"{what} -> {got[1] or got[0]!r}")
        assert got == want, (f"{what}: runq answered {got!r}, the model expects {want!r}\n"
                             f"{self.story()}")
        name = what.split("(")[0].split(" ")[0]
        if name == "sweep":
            SEEN.update(f"sweep: {action}" for action in {a for _, a in got[0]})
        elif name == "claim":
            SEEN.update(f"claim: attempt {row[2]}{', resumed' if row[3] else ''}"
                        f"{', with checkpoint' if row[4] else ''}"
                        f"{', with inputs' if row[5] else ''}" for row in got[0])
        else:
            value = got[1] or (got[0][1] if isinstance(got[0], tuple) else got[0])
            SEEN[f"{name}: {value}"] += 1

    def story(self) -> str:
        return "the example so far:\n" + "\n".join(f"  {i:2d}. {line}"
                                                    for i, line in enumerate(self.trace, 1))

    def pick(self, data: st.DataObject, likely: list[Any], anything: list[Any], label: str) -> Any:
        """Mostly one of `likely` (when there is one), sometimes any of `anything`."""
        if likely and data.draw(st.integers(0, 9), label=f"{label} likely") < 8:
            return data.draw(st.sampled_from(likely), label=label)
        return data.draw(st.sampled_from(anything or likely), label=label)

    def live(self, h: Handle) -> bool:
        r = self.model.runs.get(h.run_id)
        return r is not None and r.status == "running" and r.epoch == h.epoch

    def pick_handle(self, data: st.DataObject) -> Handle:
        """A live handle mostly; else any handle held so far, or one forged
        for a run: an epoch the worker was never, or is no longer, given --
        one the run had and lost (its epoch - 1, or 0) or one it never had
        (negative, above its epoch, the largest bigint)."""
        if not self.handles or data.draw(st.integers(0, 7), label="forge") == 5:
            run_id = data.draw(st.sampled_from(sorted(self.model.runs)), label="run_id")
            epoch = self.model.runs[run_id].epoch
            forged = Handle(run_id, data.draw(st.sampled_from(
                [epoch - 1, epoch + 1, 0, -1, MAX_EPOCH, MIN_EPOCH]), label="forged epoch"),
                "forger")
            self.handles.append(forged)
            return forged
        handle: Handle = self.pick(data, [h for h in self.handles if self.live(h)], self.handles,
                                   "handle")
        return handle

    def pick_run(self, data: st.DataObject, statuses: tuple[str, ...]) -> int:
        ids = sorted(self.model.runs)
        run_id: int = self.pick(data, [i for i in ids if self.model.runs[i].status in statuses],
                                ids, "run_id")
        return run_id

    # ---- submitters
    def submit(self, q: Request) -> None:
        rows, state = self.call(
            "SELECT run_id, outcome FROM runq.submit(tenant_id => %s, kind => %s, payload => %s,"
            " session_id => %s, priority => %s, idempotency_key => %s, principal_id => %s,"
            " scheduled_for => %s, max_attempts => %s, recovery_policy => %s, queue_ttl => %s)",
            (q.tenant, q.kind, Jsonb(dict(q.payload)), q.session, q.priority, q.key, q.principal,
             SCHEDULES[q.sched], q.max_attempts, q.policy, TTL if q.ttl else None))
        got: Outcome = ((rows[0][0], rows[0][1]) if rows else None, state)
        created = got[0][0] if got[0] and got[0][1] == "created" else None
        self.expect(f"submit {q}", got, self.model.submit(q, created))

    def do_submit(self, data: st.DataObject) -> None:
        """A new request; for a session whose run waits for the user, its answer."""
        waiting = sorted({(r.tenant, r.session) for r in self.model.runs.values()
                          if r.status == "waiting_for_user" and r.session is not None}, key=repr)
        tenant, session = self.pick(data, waiting, SESSIONS, "session")
        fields: dict[str, Any] = data.draw(REQUESTS, label="request")
        self.submit(Request(tenant=tenant, session=session, **fields))

    def do_resubmit(self, data: st.DataObject) -> None:
        """An idempotency key used again: for the same request (duplicate) or
        for another one (RQ001)."""
        if not self.model.keys:
            return self.do_submit(data)
        scope = data.draw(st.sampled_from(sorted(self.model.keys, key=repr)), label="key")
        original = self.model.keys[scope][0]
        change = data.draw(st.sampled_from([None, None, None, *CHANGES]), label="change")
        self.submit(replace(original, **CHANGES[change](original)) if change else original)

    def do_cancel(self, data: st.DataObject) -> None:
        run_id = self.pick_run(data, NON_TERMINAL)
        got = self.scalar("SELECT runq.cancel(run_id => %s, reason => 'model')", (run_id,))
        self.expect(f"cancel({run_id})", got, self.model.cancel(run_id))

    def do_deliver_input(self, data: st.DataObject) -> None:
        run_id = self.pick_run(data, ("waiting_for_user",))
        value = {"answer": data.draw(st.integers(0, 2), label="answer")}
        got = self.scalar("SELECT runq.deliver_input(run_id => %s, input => %s)",
                          (run_id, Jsonb(value)))
        self.expect(f"deliver_input({run_id})", got, self.model.deliver_input(run_id, value))

    def do_redrive(self, data: st.DataObject) -> None:
        run_id = self.pick_run(data, ("failed",))
        got = self.scalar("SELECT runq.redrive(run_id => %s, reason => 'model')", (run_id,))
        self.expect(f"redrive({run_id})", got, self.model.redrive(run_id))

    def do_rejected(self, data: st.DataObject) -> None:
        """A call refused whatever the state (RQ003, 22023); the invariant
        then checks that it changed nothing."""
        state, query = data.draw(st.sampled_from(REJECTED), label="call")
        params: tuple[Any, ...] | None = None
        if "epoch => %s" in query:  # a bad argument to a worker function: before the fence
            h = self.pick_handle(data) if self.model.runs else Handle(MISSING, 1, "nobody")
            params = (h.run_id, h.epoch)
        elif "%s" in query:
            params = (MISSING,)
        self.expect(f"rejected {query}", self.scalar(query, params), (None, state))

    # ---- workers
    def do_claim(self, data: st.DataObject) -> None:
        """Any kind mostly (kinds omitted, the v0.1 call); sometimes by kind."""
        classes = data.draw(st.sampled_from(CLASS_SETS), label="classes")
        kinds = data.draw(st.sampled_from(KINDS), label="kinds")
        max_runs = data.draw(st.integers(1, 3), label="max_runs")
        short = data.draw(st.sampled_from([False, False, True]), label="1 ms lease")
        worker = data.draw(st.sampled_from(["w1", "w2", "w3"]), label="worker")
        rows, state = self.call(
            "SELECT run_id, epoch, attempt, resumed, checkpoint, inputs, payload, session_id,"
            " priority, kind FROM runq.claim(classes => %s::integer[], worker_id => %s,"
            " lease => %s, max_runs => %s" + (")" if kinds is None else ", kinds => %s::text[])"),
            (classes, worker, SHORT_LEASE if short else LONG_LEASE, max_runs,
             *([] if kinds is None else [kinds])))
        if kinds is not None and any(r.claimable() and r.priority in classes
                                     and r.kind not in kinds for r in self.model.runs.values()):
            SEEN["claim by kind: a ready run of another kind passed over"] += 1
        want = self.model.claim(classes, kinds, max_runs, short)
        got_rows = sorted(rows or [], key=lambda row: row[0])
        self.expect(f"claim({classes}{'' if kinds is None else f', kinds={kinds}'},"
                    f" max_runs={max_runs}, {worker}{', 1 ms lease' if short else ''})",
                    (got_rows, state), (sorted(want, key=lambda row: row[0]), None))
        self.handles.extend(Handle(row[0], row[1], worker) for row in got_rows)

    def do_heartbeat(self, data: st.DataObject) -> None:
        h = self.pick_handle(data)
        got = self.scalar("SELECT runq.heartbeat(run_id => %s, epoch => %s)", (h.run_id, h.epoch))
        self.expect(f"heartbeat({h})", got, self.model.heartbeat(h))

    def do_checkpoint(self, data: st.DataObject) -> None:
        h = self.pick_handle(data)
        state = {"step": data.draw(st.integers(0, 3), label="step")}
        got = self.scalar("SELECT runq.checkpoint(run_id => %s, epoch => %s, state => %s)",
                          (h.run_id, h.epoch, Jsonb(state)))
        self.expect(f"checkpoint({h})", got, self.model.checkpoint(h, state))

    def do_begin_turn(self, data: st.DataObject) -> None:
        h = self.pick_handle(data)
        got = self.scalar("SELECT runq.begin_turn(run_id => %s, epoch => %s)", (h.run_id, h.epoch))
        self.expect(f"begin_turn({h})", got, self.model.begin_turn(h))

    def do_begin_tool(self, data: st.DataObject) -> None:
        """A new call mostly; sometimes a call_id the run already began (a
        retry of a retryable or uncertain call is allowed, of others RQ004)."""
        h = self.pick_handle(data)
        self.next_call += 1
        call_id = self.pick(data, [f"c{self.next_call}"], sorted(self.model.runs[h.run_id].calls)
                            if h.run_id in self.model.runs else [], "call_id")
        idempotency = data.draw(st.sampled_from(IDEMPOTENCY), label="idempotency")
        got = self.scalar(
            "SELECT runq.begin_tool(run_id => %s, epoch => %s, call_id => %s, tool => 'search',"
            " idempotency => %s, args => %s)",
            (h.run_id, h.epoch, call_id, idempotency, Jsonb({"q": call_id})))
        self.expect(f"begin_tool({h}, {call_id!r}, {idempotency!r})", got,
                    self.model.begin_tool(h, call_id, idempotency))

    def do_end_tool(self, data: st.DataObject) -> None:
        """Mostly a started call; sometimes one in another state (RQ004) or
        one the run never began (22023)."""
        h = self.pick_handle(data)
        run = self.model.runs.get(h.run_id)
        calls = run.calls if run else {}
        call_id = self.pick(data, sorted(c for c in calls if calls[c].status == "started"),
                            [*sorted(calls), "never-begun"], "call_id")
        got = self.scalar(
            "SELECT runq.end_tool(run_id => %s, epoch => %s, call_id => %s, outcome => %s)",
            (h.run_id, h.epoch, call_id, Jsonb({"ok": True})))
        self.expect(f"end_tool({h}, {call_id!r})", got, self.model.end_tool(h, call_id))

    def do_complete(self, data: st.DataObject) -> None:
        h = self.pick_handle(data)
        result = data.draw(st.sampled_from([None, {"answer": 42}]), label="result")
        got = self.scalar("SELECT runq.complete(run_id => %s, epoch => %s, result => %s)",
                          (h.run_id, h.epoch, None if result is None else Jsonb(result)))
        self.expect(f"complete({h})", got, self.model.complete(h, result))

    def do_fail(self, data: st.DataObject) -> None:
        h = self.pick_handle(data)
        code = data.draw(st.sampled_from(["tool_error", "bad_request"]), label="code")
        message = data.draw(st.sampled_from([None, "it broke"]), label="message")
        failure = {"code": code} if message is None else {"code": code, "message": message}
        got = self.scalar("SELECT runq.fail(run_id => %s, epoch => %s, failure => %s)",
                          (h.run_id, h.epoch, Jsonb(failure)))
        self.expect(f"fail({h}, {failure})", got, self.model.fail(h, code, message))

    def do_ask_user(self, data: st.DataObject) -> None:
        h = self.pick_handle(data)
        question = {"q": data.draw(st.integers(0, 2), label="question")}
        got = self.scalar("SELECT runq.ask_user(run_id => %s, epoch => %s, question => %s)",
                          (h.run_id, h.epoch, Jsonb(question)))
        self.expect(f"ask_user({h})", got, self.model.ask_user(h, question))

    def do_release(self, data: st.DataObject) -> None:
        h = self.pick_handle(data)
        got = self.scalar("SELECT runq.release(run_id => %s, epoch => %s)", (h.run_id, h.epoch))
        self.expect(f"release({h})", got, self.model.release(h))

    # ---- time passing (test setup standing in for the clock), and the sweep
    def do_lease_lapses(self, data: st.DataObject) -> None:
        running = sorted(r.run_id for r in self.model.runs.values() if r.status == "running")
        run_id = data.draw(st.sampled_from(running), label="run_id")
        self.conn.execute("UPDATE runq.runs SET lease_expires_at = clock_timestamp()"
                          " - interval '1 second' WHERE run_id = %s", (run_id,))
        self.model.runs[run_id].lease_forced = True
        self.trace.append(f"(the lease of run {run_id} lapses)")

    def do_queue_ttl_runs_out(self, data: st.DataObject) -> None:
        ids = sorted(r.run_id for r in self.model.runs.values() if r.has_ttl and not r.ttl_expired)
        run_id = data.draw(st.sampled_from(ids), label="run_id")
        self.conn.execute("UPDATE runq.runs SET expires_at = clock_timestamp()"
                          " - interval '1 second' WHERE run_id = %s", (run_id,))
        self.model.runs[run_id].ttl_expired = True
        self.trace.append(f"(the queue_ttl of run {run_id} runs out)")

    def do_sweep(self, data: st.DataObject) -> None:
        if any(r.status == "running" and r.lease_short for r in self.model.runs.values()):
            time.sleep(0.002)  # past every 1 ms lease
        rows, state = self.call("SELECT run_id, action FROM runq.sweep()")
        self.expect("sweep()", (sorted(rows or []), state), (self.model.sweep(), None))

    # ---- the whole database against the model, after every step
    @invariant()
    def database_matches_model(self) -> None:
        m = self.model
        SEEN["(checks of the whole database)"] += 1
        with self.conn.pipeline():  # one round trip for the four reads
            cursors = [self.conn.execute(q) for q in (READ_RUNS, READ_CALLS, READ_EVENTS,
                                                      READ_KEYS)]
        rows, calls, events, keys = (c.fetchall() for c in cursors)

        assert [row[0] for row in rows] == sorted(m.runs), \
            f"runs in the database {[row[0] for row in rows]}, in the model {sorted(m.runs)}"
        for (run_id, tenant, session, kind, status, priority, attempts, max_attempts, sched,
             epoch, cancel, result, failure, question, finished) in rows:
            r = m.runs[run_id]
            got = {"tenant": tenant, "session": session, "kind": kind, "status": status,
                   "priority": priority, "attempts": attempts, "max_attempts": max_attempts,
                   "epoch": epoch, "cancel": cancel,
                   "failure_code": failure["code"] if failure else None,
                   "question": question, "result": result if status == "succeeded" else None,
                   "scheduled_for": sched, "finished": finished}
            want = {"tenant": r.tenant, "session": r.session, "kind": r.kind, "status": r.status,
                    "priority": r.priority, "attempts": r.attempts,
                    "max_attempts": r.max_attempts, "epoch": r.epoch, "cancel": r.cancel,
                    "failure_code": r.failure_code, "question": r.question,
                    "result": jsonable(r.result) if r.status == "succeeded" else None,
                    "scheduled_for": r.sched, "finished": r.status in TERMINAL}
            assert got == want, f"run {run_id}: database {got}, model {want}\n{self.story()}"
            if failure is not None:
                assert isinstance(failure.get("message"), str) and failure["message"], \
                    f"run {run_id}: failure without a message: {failure}"
                if r.failure_message is not None:
                    assert failure["message"] == r.failure_message, \
                        f"run {run_id}: failure {failure}, message should be {r.failure_message!r}"

        got_calls = {(run_id, call_id): (idem, status, epoch)
                     for run_id, call_id, idem, status, epoch in calls}
        want_calls = {(r.run_id, call_id): (c.idempotency, c.status, c.epoch)
                      for r in m.runs.values() for call_id, c in r.calls.items()}
        assert got_calls == want_calls, \
            f"tool calls: database {got_calls}, model {want_calls}\n{self.story()}"

        got_events: dict[int, dict[str, int]] = {run_id: {} for run_id in m.runs}
        for run_id, etype, n, epochs in events:
            assert etype in EVENT_TYPES, f"run {run_id}: unknown event type {etype}"
            got_events[run_id][etype] = n
            if etype == "run.fenced":
                assert n == epochs, f"run {run_id}: two run.fenced events for one epoch"
        for run_id, r in m.runs.items():
            want_events = {k: v for k, v in r.events.items() if v}
            if r.fenced:
                want_events["run.fenced"] = len(r.fenced)
            assert got_events[run_id] == want_events, \
                f"run {run_id} events: database {got_events[run_id]}, model {want_events}\n" \
                f"{self.story()}"

        assert {(t, p, k): run_id for t, p, k, run_id in keys} == \
            {scope: run_id for scope, (_, run_id) in m.keys.items()}, \
            f"idempotency keys: database {keys}, model {m.keys}\n{self.story()}"


def test_model(conn: psycopg.Connection[Any]) -> None:
    # Requeued runs are claimable at the next step: the backoff is 1 microsecond.
    conn.execute("UPDATE runq.settings SET backoff_base = interval '1 microsecond',"
                 " backoff_cap = interval '1 microsecond'")
    RunqMachine.conn = conn
    run_state_machine_as_test(RunqMachine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
        print_blob=True, report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    for what, n in sorted(SEEN.items()):
        print(f"{n:7d}  {what}")
