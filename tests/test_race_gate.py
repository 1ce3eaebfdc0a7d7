"""The race gate, and a worker paused past its lease.

The race gate (docs/contract.md, "Leases, epochs and fencing"): two workers
racing on one run, with the sweeper's reclaim interval driven to zero, must end
with one committing its transitions and the other writing nothing.

Shape: LANES lanes run side by side so that many runs are in flight. A lane
owns one priority class and two workers (separate connections, real threads);
it has exactly one live run at a time, and both of its workers keep claiming
from its class, so the two race on that one run. One sweeper thread loops
runq.sweep with no pause at all, the backoff is set to a microsecond and
leases are 2 ms, so a lease is reclaimed almost as soon as it lapses. Each
worker loops claim -> heartbeat -> checkpoint -> begin_turn -> record_usage
(the model call's) -> begin_tool -> end_tool -> complete, stopping at the first
`false` (some workers pause at random between steps; some, after a `false`,
make one more "zombie" write, as a buggy worker would, which must be refused
too; some record usage once more after their complete returned true, as a
model bills the last tokens late). Python records every claim and every call
with what it returned; afterwards the event log, the run, its tool calls and
the sweeper's returned rows are checked against that record, run by run. One
iteration is one run driven to its terminal status.

The cost ledger: each record_usage sends random exact decimal amounts (some
beyond a float's precision). Spend is a fact, so a usage call is recorded
whatever it returns, from a fenced epoch or after the run finished too: the
run's usage totals (runq.get_run) and the sum of its run.usage events must
equal, exactly, the sum of every usage a worker sent, and each run.usage event
must carry the epoch of the worker that sent it, in that worker's order.

RUNQ_SOAK=1 raises the iterations from 2,000 (CI: at least 1,000 are required) to 100,000.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Context, Decimal, Inexact
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb, set_json_loads

SOAK = os.environ.get("RUNQ_SOAK") == "1"
ITERATIONS = 100_000 if SOAK else 2_000
LANES = 8
LEASE = timedelta(milliseconds=2)
MAX_ATTEMPTS = 4
PAUSE_CHANCE = 0.15  # before each step, a worker may stall for up to PAUSE_MAX seconds
PAUSE_MAX = 0.004
ZOMBIE_CHANCE = 0.3  # after a false, a worker may make one more write anyway
LATE_USAGE_CHANCE = 0.3  # after its complete returned true, a worker may record usage once more
# Liveness guard only (a run that never reaches a terminal status must not hang CI).
GIVE_UP_AFTER = max(600.0, ITERATIONS * 0.1)

STEPS = ("heartbeat", "checkpoint", "begin_turn", "record_usage", "begin_tool", "end_tool", "complete")
TERMINAL_EVENTS = ("run.succeeded", "run.failed", "run.cancelled")
TERMINAL_STATUSES = ("succeeded", "failed", "cancelled")
# The event each worker call appends when it applies (heartbeats append nothing).
EVENT_OF_CALL = {
    "checkpoint": "run.checkpointed",
    "begin_turn": "run.turn_started",
    "begin_tool": "run.tool_started",
    "end_tool": "run.tool_finished",
    "complete": "run.succeeded",
}
WORKER_EVENTS = set(EVENT_OF_CALL.values())
# Logged for every record_usage, whatever it returns: not a transition of the run.
LEDGER_EVENTS = {"run.fenced", "run.usage"}

Connect = Callable[[], psycopg.Connection[Any]]

SQL_CLAIM = ("SELECT run_id, epoch, attempt, checkpoint, inputs, resumed "
             "FROM runq.claim(classes => %s, worker_id => %s, lease => %s)")
SQL = {
    "heartbeat": "SELECT runq.heartbeat(run_id => %s, epoch => %s)",
    "checkpoint": "SELECT runq.checkpoint(run_id => %s, epoch => %s, state => %s)",
    "begin_turn": "SELECT runq.begin_turn(run_id => %s, epoch => %s)",
    "begin_tool": ("SELECT runq.begin_tool(run_id => %s, epoch => %s, call_id => %s, tool => %s, "
                   "idempotency => %s, args => %s)"),
    "end_tool": "SELECT runq.end_tool(run_id => %s, epoch => %s, call_id => %s, outcome => %s)",
    "complete": "SELECT runq.complete(run_id => %s, epoch => %s, result => %s)",
    "record_usage": "SELECT runq.record_usage(run_id => %s, epoch => %s, usage => %s)",
}

Usage = dict[str, Decimal | int]
# Sums and scalings in Python are exact too, or raise: a Decimal rounds to 28 digits by default.
EXACT = Context(prec=400, traps=[Inexact])


def usage_json(usage: Usage) -> str:
    """JSON text of a usage, each amount written out exactly (json.dumps has no Decimal)."""
    return "{" + ", ".join(f"{json.dumps(k)}: {format(v, 'f') if isinstance(v, Decimal) else v}"
                           for k, v in usage.items()) + "}"


def random_usage(rng: random.Random) -> Usage:
    """What a model or tool call cost: a few keys, exact amounts. credits has up to 45
    significant digits, which no float holds: a sum that went through one would show."""
    usage: Usage = {"cost_usd": Decimal(rng.randrange(10**6)).scaleb(-6, EXACT)}
    if rng.random() < 0.7:
        usage["input_tokens"] = rng.randrange(5000)
        usage["output_tokens"] = rng.randrange(2000)
    if rng.random() < 0.2:
        usage["credits"] = Decimal(rng.randrange(10**rng.randint(1, 45))).scaleb(-rng.randint(0, 25), EXACT)
    return usage


def add_usage(total: dict[str, Decimal], usage: dict[str, Any]) -> None:
    for k, v in usage.items():
        total[k] = EXACT.add(total.get(k, Decimal(0)), Decimal(v))


def drive_reclaim_to_zero(conn: psycopg.Connection[Any]) -> None:
    """A requeued run is claimable again a microsecond after its lease is swept (a DBA's settings change)."""
    conn.execute("UPDATE runq.settings SET backoff_base = interval '1 microsecond', "
                 "backoff_cap = interval '1 microsecond'")


def tool_class(run_id: int) -> str:
    return "non_idempotent" if run_id % 2 else "idempotent"


def checkpoint_state(worker: str, epoch: int) -> dict[str, Any]:
    return {"worker": worker, "epoch": epoch}


def result_of(worker: str, epoch: int) -> dict[str, Any]:
    return {"done_by": worker, "epoch": epoch}


def call_args(name: str, run_id: int, epoch: int, worker: str) -> list[Any]:
    call_id = f"call-{epoch}"
    return {
        "heartbeat": [run_id, epoch],
        "checkpoint": [run_id, epoch, Jsonb(checkpoint_state(worker, epoch))],
        "begin_turn": [run_id, epoch],
        "begin_tool": [run_id, epoch, call_id, "search", tool_class(run_id), Jsonb({"q": worker})],
        "end_tool": [run_id, epoch, call_id, Jsonb({"hits": epoch})],
        "complete": [run_id, epoch, Jsonb(result_of(worker, epoch))],
    }[name]


def loads_exactly(data: str | bytes) -> Any:
    """jsonb as Python, numbers with a fraction as Decimal: the amounts exactly."""
    return json.loads(data, parse_float=Decimal)


# --------------------------------------------------------------------------
# what the workers saw


@dataclass
class Claim:
    run_id: int
    epoch: int
    worker: str
    attempt: int
    checkpoint: Any
    inputs: Any
    resumed: bool
    # (call name, returned value, zombie?) in call order, record_usage calls included
    calls: list[tuple[str, Any, bool]] = field(default_factory=list)
    # every record_usage of this epoch that returned, in call order: (usage, returned, when);
    # when is "step", "zombie" (after a false) or "late" (after its complete returned true)
    usages: list[tuple[Usage, Any, str]] = field(default_factory=list)


@dataclass
class Lane:
    index: int
    remaining: int
    current: int | None = None
    done: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def priority(self) -> int:
        return 100 + self.index


class Worker(threading.Thread):
    def __init__(self, lane: Lane, name: str, conn: psycopg.Connection[Any], stop: threading.Event,
                 seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.lane = lane
        self.conn = conn
        self.stop = stop
        self.rng = random.Random(seed)
        self.claims: list[Claim] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.loop()
        except Exception as e:  # reported by the test
            self.error = e
            self.stop.set()

    def call(self, name: str, c: Claim, when: str = "step") -> Any:
        if name == "record_usage":
            usage = random_usage(self.rng)
            ok = self.conn.execute(SQL[name], [c.run_id, c.epoch, Jsonb(usage, dumps=usage_json)]).fetchone()[0]
            c.usages.append((usage, ok, when))  # only once it returned: a call that raised recorded nothing
            return ok
        return self.conn.execute(SQL[name], call_args(name, c.run_id, c.epoch, self.name)).fetchone()[0]

    def work(self, c: Claim) -> None:
        for step in STEPS:
            if self.rng.random() < PAUSE_CHANCE:
                time.sleep(self.rng.uniform(0, PAUSE_MAX))
            ok = self.call(step, c)
            c.calls.append((step, ok, False))
            if ok is not True:
                if self.rng.random() < ZOMBIE_CHANCE:
                    zombie = self.rng.choice(["heartbeat", "checkpoint", "begin_turn", "complete",
                                              "record_usage"])
                    c.calls.append((zombie, self.call(zombie, c, "zombie"), True))
                return
        if self.rng.random() < LATE_USAGE_CHANCE:  # the run has finished: spend is still recorded
            c.calls.append(("record_usage", self.call("record_usage", c, "late"), False))

    def loop(self) -> None:
        lane = self.lane
        while not self.stop.is_set():
            row = self.conn.execute(SQL_CLAIM, [[lane.priority], self.name, LEASE]).fetchone()
            if row is not None:
                c = Claim(int(row[0]), int(row[1]), self.name, row[2], row[3], row[4], row[5])
                self.claims.append(c)
                self.work(c)
                continue
            with lane.lock:
                if lane.current is not None:
                    status = self.conn.execute("SELECT status FROM runq.get_run(run_id => %s)",
                                               [lane.current]).fetchone()[0]
                    if status in TERMINAL_STATUSES:
                        lane.done.append(lane.current)
                        lane.current = None
                if lane.current is None:
                    if lane.remaining == 0:
                        return
                    lane.current = int(self.conn.execute(
                        "SELECT run_id FROM runq.submit(tenant_id => 'race', kind => 'race.gate', payload => %s, "
                        "priority => %s, max_attempts => %s)",
                        [Jsonb({"lane": lane.index, "left": lane.remaining}), lane.priority, MAX_ATTEMPTS],
                    ).fetchone()[0])
                    lane.remaining -= 1
                    continue
            time.sleep(0.0005)


class Sweeper(threading.Thread):
    def __init__(self, conn: psycopg.Connection[Any], stop: threading.Event) -> None:
        super().__init__(name="sweeper", daemon=True)
        self.conn = conn
        self.stop = stop
        self.rows: list[tuple[int, str]] = []
        self.calls = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.rows.extend((int(r[0]), str(r[1])) for r in
                                 self.conn.execute("SELECT run_id, action FROM runq.sweep()").fetchall())
                self.calls += 1
        except Exception as e:  # reported by the test
            self.error = e
            self.stop.set()


# --------------------------------------------------------------------------
# the checks, one run at a time


@dataclass
class Observed:
    events: list[tuple[int, str, Any]]  # (epoch, type, payload) in the order run_events gives
    status: str
    result: Any
    failure: Any
    lease_epoch: int
    attempts: int
    tools: dict[str, tuple[int, str, str]]  # call_id -> (epoch, status, idempotency)
    usage: Any = None  # runq.get_run's usage: the run's totals


@dataclass
class Tally:
    fenced_events: int = 0
    false_returns: int = 0
    zombie_writes: int = 0
    heartbeat_false: int = 0
    fenced_by_reclaim: int = 0
    fenced_by_other_worker: int = 0
    succeeded: int = 0
    dead_lettered: int = 0
    claims: int = 0
    usage_calls: int = 0
    usage_false: int = 0
    usage_stale: int = 0  # returned false from an epoch a later claim had replaced
    usage_zombie: int = 0
    usage_late: int = 0  # after the worker's own complete returned true


def check_run(run_id: int, obs: Observed, claims: list[Claim], sweeps: Counter[str], tally: Tally) -> list[str]:
    p: list[str] = []
    say = p.append
    evs = obs.events
    types = [t for _, t, _ in evs]
    by_epoch = {c.epoch: c for c in claims}
    if len(by_epoch) != len(claims):
        say(f"two claims returned one epoch: {[(c.worker, c.epoch) for c in claims]}")

    # exactly one terminal transition, and nothing but run.fenced and run.usage after it
    terminal = [i for i, t in enumerate(types) if t in TERMINAL_EVENTS]
    if len(terminal) != 1:
        say(f"{len(terminal)} terminal events: {types}")
    else:
        after = [t for t in types[terminal[0] + 1:] if t not in LEDGER_EVENTS]
        if after:
            say(f"events after the terminal one: {after}")
        if types[terminal[0]].removeprefix("run.") != obs.status:
            say(f"terminal event {types[terminal[0]]} but status {obs.status}")
    if not evs or evs[0][:2] != (0, "run.created"):
        say(f"first event is not run.created at epoch 0: {evs[:1]}")

    # claims: epochs 1..n in order, one per claim a worker actually received
    claimed = [ep for ep, t, _ in evs if t == "run.claimed"]
    if claimed != list(range(1, len(claimed) + 1)):
        say(f"run.claimed epochs {claimed}")
    if sorted(claimed) != sorted(by_epoch):
        say(f"run.claimed epochs {claimed} but workers received epochs {sorted(by_epoch)}")
    if obs.lease_epoch != len(claimed) or obs.attempts != len(claimed):
        say(f"lease_epoch {obs.lease_epoch}, attempts {obs.attempts} after {len(claimed)} claims")

    # every state-changing event belongs to the newest epoch; after run.fenced(e), nothing of epoch e
    # (run.usage is no state change: it is logged for fenced epochs too, checked below)
    current = 0
    fenced: list[int] = []
    requeued: set[int] = set()
    for ep, t, _ in evs:
        if t in WORKER_EVENTS and ep in requeued:
            say(f"{t} of epoch {ep} after the sweep requeued epoch {ep}")
        if t == "run.requeued":
            requeued.add(ep)
        if t == "run.claimed":
            current = ep
        elif t == "run.fenced":
            if ep > current:
                say(f"run.fenced of epoch {ep} before epoch {ep} was claimed")
            fenced.append(ep)
        elif t == "run.usage":
            continue
        else:
            if ep != current:
                say(f"{t} of epoch {ep} after run.claimed of epoch {current}: {[(e, ty) for e, ty, _ in evs]}")
            if ep in fenced:
                say(f"{t} of epoch {ep} after run.fenced of epoch {ep}")
    if len(fenced) != len(set(fenced)):
        say(f"more than one run.fenced per epoch: {fenced}")
    tally.fenced_events += len(fenced)

    # per epoch: what the worker's calls returned is exactly what the log holds
    completes: list[Claim] = []
    for ep, c in sorted(by_epoch.items()):
        for name, ok, _ in c.calls:
            if not isinstance(ok, bool):
                say(f"{name} of epoch {ep} returned {ok!r}, not a boolean")
        applied = [EVENT_OF_CALL[n] for n, ok, _ in c.calls if ok is True and n in EVENT_OF_CALL]
        logged = [t for e, t, _ in evs if e == ep and t in WORKER_EVENTS]
        if applied != logged:
            say(f"epoch {ep} ({c.worker}): calls {c.calls} but its log holds {logged}")
        returns = [ok for _, ok, _ in c.calls]
        if False in returns:
            first = returns.index(False)
            if True in returns[first:]:
                say(f"epoch {ep} ({c.worker}): a write applied after a false: {c.calls}")
            tally.false_returns += 1
            tally.heartbeat_false += c.calls[first][0] == "heartbeat"
            tally.zombie_writes += sum(1 for _, _, z in c.calls if z)
            if ep not in fenced:
                say(f"epoch {ep} ({c.worker}) got false but no run.fenced of epoch {ep}: {types}")
            if ep < len(claimed):
                tally.fenced_by_reclaim += 1
                tally.fenced_by_other_worker += by_epoch[ep + 1].worker != c.worker
        elif ep in fenced:
            say(f"run.fenced of epoch {ep} but no call of that epoch returned false: {c.calls}")
        if ("complete", True, False) in c.calls:
            completes.append(c)
        # what the claim handed over: the newest applied checkpoint of earlier epochs, no inputs
        earlier = [checkpoint_state(by_epoch[e].worker, e) for e in sorted(by_epoch) if e < ep
                   and ("checkpoint", True) in [(n, ok) for n, ok, _ in by_epoch[e].calls]]
        want = earlier[-1] if earlier else None
        if c.checkpoint != want:
            say(f"claim of epoch {ep} resumed from checkpoint {c.checkpoint!r}, newest applied was {want!r}")
        if c.attempt != ep or c.resumed != (ep > 1) or c.inputs != []:
            say(f"claim of epoch {ep}: attempt {c.attempt}, resumed {c.resumed}, inputs {c.inputs!r}")
    for ep in fenced:
        if ep not in by_epoch:
            say(f"run.fenced of epoch {ep} that no worker held")
    tally.claims += len(claims)

    # the ledger: every usage a worker sent is recorded, whatever the call returned, under the
    # sender's epoch and in its order; the totals and the events' sum are the exact sum of them all
    sent: dict[str, Decimal] = {}
    for ep, c in sorted(by_epoch.items()):
        logged_usage = [payload for e, t, payload in evs if e == ep and t == "run.usage"]
        if logged_usage != [u for u, _, _ in c.usages]:
            say(f"epoch {ep} ({c.worker}) sent usages {[(usage_json(u), ok, w) for u, ok, w in c.usages]} "
                f"but its run.usage events hold {logged_usage}")
        for u, ok, when in c.usages:
            add_usage(sent, u)
            tally.usage_calls += 1
            tally.usage_false += ok is False
            tally.usage_stale += ok is False and ep < len(claimed)
            tally.usage_zombie += when == "zombie"
            tally.usage_late += when == "late"
            if when == "late" and ok is not False:
                say(f"epoch {ep} ({c.worker}): record_usage after its complete returned {ok!r}")
    strays = [(e, p) for e, t, p in evs if t == "run.usage" and e not in by_epoch]
    if strays:
        say(f"run.usage events of epochs no worker held: {strays}")
    in_events: dict[str, Decimal] = {}
    for _, t, payload in evs:
        if t == "run.usage":
            add_usage(in_events, payload)
    if in_events != sent:
        say(f"run.usage events sum to {in_events}, the workers sent {sent}")
    if not isinstance(obs.usage, dict) or obs.usage != sent:
        say(f"get_run usage {obs.usage!r}, the workers sent {sent}")

    # the outcome: one complete that returned true and its result, or the sweep's dead letter
    requeues = [ep for ep, t, _ in evs if t == "run.requeued"]
    if requeues != list(range(1, len(claimed))):
        say(f"run.requeued epochs {requeues} for {len(claimed)} claims")
    if set(sweeps) - {"requeued", "dead_lettered"}:
        say(f"unexpected sweep actions {dict(sweeps)}")
    if sweeps["requeued"] != len(requeues):
        say(f"sweep returned requeued {sweeps['requeued']} times, log has {len(requeues)} run.requeued")
    if obs.status == "succeeded":
        tally.succeeded += 1
        if len(completes) != 1:
            say(f"succeeded with {len(completes)} completes returning true")
        elif obs.result != result_of(completes[0].worker, completes[0].epoch):
            say(f"result {obs.result!r} is not the one complete of epoch {completes[0].epoch} wrote")
        if sweeps["dead_lettered"]:
            say("succeeded but a sweep dead-lettered it")
    elif obs.status == "failed":
        tally.dead_lettered += 1
        code = (obs.failure or {}).get("code")
        if completes or code != "max_attempts_exceeded" or len(claimed) != MAX_ATTEMPTS:
            say(f"failed ({code}) after {len(claimed)} claims with {len(completes)} completes true")
        if sweeps["dead_lettered"] != 1:
            say(f"failed but the sweep returned dead_lettered {sweeps['dead_lettered']} times")
    else:
        say(f"ends {obs.status}")

    # tool calls: one per epoch whose begin_tool applied, finished only when its end_tool applied,
    # and resolved on requeue (retryable or uncertain by class) when it did not
    expected_ids = set()
    for ep, c in by_epoch.items():
        began = ("begin_tool", True, False) in c.calls
        ended = ("end_tool", True, False) in c.calls
        call_id = f"call-{ep}"
        left_started = began and not ended
        uncertain = len([t for e, t, _ in evs if e == ep and t == "run.tool_uncertain"])
        if ep in requeues:  # the sweep resolved this epoch's tool call, if it left one started
            want_uncertain = int(left_started and tool_class(run_id) == "non_idempotent")
            if uncertain != want_uncertain:
                say(f"{uncertain} run.tool_uncertain for requeued epoch {ep}, expected {want_uncertain}: {c.calls}")
        elif uncertain > int(left_started and tool_class(run_id) == "non_idempotent"):
            say(f"{uncertain} run.tool_uncertain for epoch {ep}: {c.calls}")
        if not began:
            continue
        expected_ids.add(call_id)
        row = obs.tools.get(call_id)
        if row is None:
            say(f"begin_tool of epoch {ep} returned true but tool_calls has no {call_id}")
            continue
        if row[0] != ep or row[2] != tool_class(run_id):
            say(f"{call_id}: epoch {row[0]}, idempotency {row[2]}")
        if ended:
            if row[1] != "finished":
                say(f"{call_id}: end_tool returned true but status {row[1]}")
        elif ep in requeues:
            want = "retryable" if tool_class(run_id) == "idempotent" else "uncertain"
            if row[1] != want:
                say(f"{call_id} left started by requeued epoch {ep}: status {row[1]}, expected {want}")
        elif row[1] == "finished":
            say(f"{call_id}: finished though no end_tool of epoch {ep} returned true")
    if set(obs.tools) != expected_ids:
        say(f"tool_calls {sorted(obs.tools)} but applied begin_tool calls {sorted(expected_ids)}")
    return p


def observe(conn: psycopg.Connection[Any], run_ids: list[int]) -> dict[int, Observed]:
    out: dict[int, Observed] = {}
    for i in range(0, len(run_ids), 2000):
        chunk = run_ids[i:i + 2000]
        for r in conn.execute(
                """
                SELECT t.id, i.status, i.result, i.failure, i.lease_epoch, i.attempts, i.usage
                  FROM unnest(%s::bigint[]) AS t(id), LATERAL runq.get_run(run_id => t.id) AS i
                """, [chunk]):
            out[int(r[0])] = Observed([], r[1], r[2], r[3], int(r[4]), int(r[5]), {}, r[6])
        for r in conn.execute(
                """
                SELECT t.id, e.epoch, e.type, e.payload
                  FROM unnest(%s::bigint[]) AS t(id),
                       LATERAL runq.run_events(run_id => t.id)
                           WITH ORDINALITY AS e(event_id, epoch, type, payload, created_at, ord)
                 ORDER BY t.id, e.ord
                """, [chunk]):
            out[int(r[0])].events.append((int(r[1]), str(r[2]), r[3]))
        for r in conn.execute(
                """
                SELECT t.id, c.call_id, c.epoch, c.status, c.idempotency
                  FROM unnest(%s::bigint[]) AS t(id), LATERAL runq.tool_calls(run_id => t.id) AS c
                """, [chunk]):
            out[int(r[0])].tools[str(r[1])] = (int(r[2]), str(r[3]), str(r[4]))
    return out


# --------------------------------------------------------------------------
# the tests


def test_race_gate(conn: psycopg.Connection[Any], connect: Connect, capsys: pytest.CaptureFixture[str]) -> None:
    drive_reclaim_to_zero(conn)
    stop = threading.Event()
    per_lane, extra = divmod(ITERATIONS, LANES)
    lanes = [Lane(i, per_lane + (i < extra)) for i in range(LANES)]
    seed = int(os.environ.get("RUNQ_RACE_SEED", random.randrange(1 << 30)))
    workers = [Worker(lane, f"lane{lane.index}-w{k}", connect(), stop, seed + 2 * lane.index + k)
               for lane in lanes for k in (0, 1)]
    sweeper = Sweeper(connect(), stop)

    started = time.monotonic()
    sweeper.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join(max(0.0, GIVE_UP_AFTER - (time.monotonic() - started)))
    live = [w.name for w in workers if w.is_alive()]
    stop.set()
    sweeper.join(30)
    for w in workers:
        w.join(30)
    elapsed = time.monotonic() - started

    errors = [(t.name, t.error) for t in [*workers, sweeper] if t.error is not None]
    assert not errors, f"threads failed: {errors}"
    assert not live, (f"liveness: after {GIVE_UP_AFTER:.0f} s lanes {live} still had runs that never became "
                      f"terminal: {[lane.current for lane in lanes if lane.current is not None]}")

    run_ids = [r for lane in lanes for r in lane.done]
    assert len(run_ids) == len(set(run_ids)) == ITERATIONS

    claims: dict[int, list[Claim]] = defaultdict(list)
    for w in workers:
        for c in w.claims:
            claims[c.run_id].append(c)
    stray = set(claims) - set(run_ids)
    assert not stray, f"workers claimed runs the lanes never submitted: {sorted(stray)[:10]}"
    sweeps: dict[int, Counter[str]] = defaultdict(Counter)
    for run_id, action in sweeper.rows:
        sweeps[run_id][action] += 1
    assert set(sweeps) <= set(run_ids)

    set_json_loads(loads_exactly, conn)  # the usage amounts as Decimal, exactly
    observed = observe(conn, run_ids)
    tally = Tally()
    problems: list[str] = []
    for run_id in run_ids:
        problems += [f"run {run_id}: {m}" for m in
                     check_run(run_id, observed[run_id], claims[run_id], sweeps[run_id], tally)]

    with capsys.disabled():
        print(f"\nrace gate: {ITERATIONS} iterations (runs) in {elapsed:.1f} s, {LANES} lanes x 2 workers, "
              f"seed {seed}; {tally.claims} claims, {sweeper.calls} sweeps; "
              f"{tally.fenced_events} fencings observed (run.fenced), {tally.false_returns} workers told false "
              f"({tally.heartbeat_false} by a heartbeat), {tally.fenced_by_reclaim} after a reclaim "
              f"({tally.fenced_by_other_worker} by the other worker), {tally.zombie_writes} zombie writes refused; "
              f"{tally.succeeded} succeeded, {tally.dead_lettered} dead-lettered; "
              f"{tally.usage_calls} record_usage calls ({tally.usage_false} false: {tally.usage_stale} from "
              f"a replaced epoch, {tally.usage_zombie} zombie, {tally.usage_late} after the run finished)")

    assert not problems, f"{len(problems)} violations (seed {seed}):\n" + "\n".join(problems[:40])
    # The gate proves nothing unless workers really lost runs to each other.
    assert tally.fenced_by_other_worker > 0, "no worker was ever fenced by the other: the race never happened"
    assert tally.fenced_events == tally.false_returns
    # Nor the ledger unless usage came from replaced epochs and from finished runs.
    assert tally.usage_stale > 0 and tally.usage_late > 0, tally


def test_worker_paused_past_its_lease_is_fenced_and_the_new_holder_completes(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    drive_reclaim_to_zero(conn)
    a, b = connect(), connect()
    run_id = int(conn.execute("SELECT run_id FROM runq.submit(tenant_id => 'acme', kind => 'chat.turn', "
                              "session_id => 's1', priority => 0)").fetchone()[0])

    row = a.execute("SELECT run_id, epoch, lease_expires_at FROM runq.claim(classes => %s, worker_id => 'a', "
                    "lease => %s)", [[0], timedelta(milliseconds=50)]).fetchone()
    assert row is not None and int(row[0]) == run_id and int(row[1]) == 1
    assert a.execute(SQL["heartbeat"], [run_id, 1]).fetchone()[0] is True
    assert a.execute(SQL["checkpoint"], [run_id, 1, Jsonb({"step": "a"})]).fetchone()[0] is True
    # The heartbeat extended the lease by its length from the heartbeat's instant, so it
    # ends before (now, read after the heartbeat) + 50 ms.
    expires = conn.execute("SELECT pg_catalog.clock_timestamp() + interval '50 milliseconds'").fetchone()[0]

    # A pauses: its lease lapses on the database clock and a sweeper reclaims the run.
    while not conn.execute("SELECT pg_catalog.clock_timestamp() > %s", [expires]).fetchone()[0]:
        conn.execute("SELECT pg_catalog.pg_sleep(0.01)")
    assert conn.execute("SELECT run_id, action FROM runq.sweep()").fetchall() == [(run_id, "requeued")]

    row = None
    for _ in range(1000):  # the backoff is a microsecond; poll on the database clock
        row = b.execute("SELECT run_id, epoch, checkpoint, resumed FROM runq.claim(classes => %s, "
                        "worker_id => 'b', lease => %s)", [[0], timedelta(minutes=5)]).fetchone()
        if row is not None:
            break
        b.execute("SELECT pg_catalog.pg_sleep(0.001)")
    assert row is not None, "the requeued run never became claimable"
    assert (int(row[0]), int(row[1]), row[2], row[3]) == (run_id, 2, {"step": "a"}, True)

    # A wakes up and tries to finish: fenced.
    assert a.execute(SQL["complete"], [run_id, 1, Jsonb({"by": "a"})]).fetchone()[0] is False
    assert b.execute(SQL["heartbeat"], [run_id, 2]).fetchone()[0] is True
    assert b.execute(SQL["complete"], [run_id, 2, Jsonb({"by": "b"})]).fetchone()[0] is True
    # A retries (a buggy worker): still fenced, and no second run.fenced.
    assert a.execute(SQL["complete"], [run_id, 1, Jsonb({"by": "a"})]).fetchone()[0] is False
    assert a.execute(SQL["heartbeat"], [run_id, 1]).fetchone()[0] is False

    info = conn.execute("SELECT status, result, lease_epoch, attempts FROM runq.get_run(run_id => %s)",
                        [run_id]).fetchone()
    assert info == ("succeeded", {"by": "b"}, 2, 2)
    evs = [(int(e), t) for e, t in conn.execute("SELECT epoch, type FROM runq.run_events(run_id => %s)",
                                                [run_id]).fetchall()]
    assert evs == [(0, "run.created"), (1, "run.claimed"), (1, "run.checkpointed"), (1, "run.requeued"),
                   (2, "run.claimed"), (1, "run.fenced"), (2, "run.succeeded")]


def test_worker_paused_past_an_unswept_lease_still_holds_the_run(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    # Only status and epoch fence: nobody else can hold a lease no sweep has reclaimed.
    a = connect()
    run_id = int(conn.execute("SELECT run_id FROM runq.submit(tenant_id => 'acme', kind => 'chat.turn', "
                              "priority => 0)").fetchone()[0])
    row = a.execute("SELECT epoch, lease_expires_at FROM runq.claim(classes => %s, lease => %s)",
                    [[0], timedelta(milliseconds=5)]).fetchone()
    assert row is not None and int(row[0]) == 1
    while not conn.execute("SELECT pg_catalog.clock_timestamp() > %s", [row[1]]).fetchone()[0]:
        conn.execute("SELECT pg_catalog.pg_sleep(0.01)")

    assert a.execute(SQL["heartbeat"], [run_id, 1]).fetchone()[0] is True
    assert a.execute(SQL["complete"], [run_id, 1, Jsonb({"by": "a"})]).fetchone()[0] is True
    assert conn.execute("SELECT status, result FROM runq.get_run(run_id => %s)",
                        [run_id]).fetchone() == ("succeeded", {"by": "a"})
    assert [t for (t,) in conn.execute("SELECT type FROM runq.run_events(run_id => %s)", [run_id])] == [
        "run.created", "run.claimed", "run.succeeded"]


def test_usage_of_a_fenced_epoch_and_of_a_finished_run_is_recorded(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    # The race gate's ledger rule, one interleaving spelled out: A's lease is reclaimed and B
    # completes; A's usage (fenced) and B's after its complete still count, each under its
    # sender's epoch, with one run.fenced per epoch. An epoch the run never had is refused.
    drive_reclaim_to_zero(conn)
    set_json_loads(loads_exactly, conn)
    a, b = connect(), connect()
    run_id = int(conn.execute("SELECT run_id FROM runq.submit(tenant_id => 'acme', kind => 'chat.turn', "
                              "priority => 0)").fetchone()[0])

    def record(worker: psycopg.Connection[Any], epoch: int, usage: Usage) -> Any:
        return worker.execute(SQL["record_usage"], [run_id, epoch, Jsonb(usage, dumps=usage_json)]).fetchone()[0]

    row = a.execute("SELECT epoch, lease_expires_at FROM runq.claim(classes => %s, worker_id => 'a', "
                    "lease => %s)", [[0], timedelta(milliseconds=20)]).fetchone()
    assert row is not None and int(row[0]) == 1
    assert record(a, 1, {"cost_usd": Decimal("0.0123"), "input_tokens": 17}) is True
    while not conn.execute("SELECT pg_catalog.clock_timestamp() > %s", [row[1]]).fetchone()[0]:
        conn.execute("SELECT pg_catalog.pg_sleep(0.005)")
    assert conn.execute("SELECT run_id, action FROM runq.sweep()").fetchall() == [(run_id, "requeued")]
    claimed = None
    for _ in range(1000):
        claimed = b.execute("SELECT epoch, usage FROM runq.claim(classes => %s, worker_id => 'b', "
                            "lease => %s)", [[0], timedelta(minutes=5)]).fetchone()
        if claimed is not None:
            break
        b.execute("SELECT pg_catalog.pg_sleep(0.001)")
    assert claimed is not None and int(claimed[0]) == 2
    # The resumed attempt sees what the first spent (the claim's usage, here as psycopg parses it).
    assert claimed[1] == {"cost_usd": 0.0123, "input_tokens": 17}

    big = Decimal("123456789012345678901234567890.000000000000000000001")
    assert record(a, 1, {"cost_usd": Decimal("0.0100"), "credits": big}) is False  # fenced: still spent
    assert record(a, 1, {"output_tokens": 3}) is False                             # no second run.fenced
    assert record(b, 2, {"cost_usd": Decimal("0.5"), "input_tokens": 0}) is True
    assert b.execute(SQL["complete"], [run_id, 2, Jsonb({"by": "b"})]).fetchone()[0] is True
    assert record(b, 2, {"cost_usd": Decimal("0.0000001")}) is False               # after the end
    for never in (0, 3, -1):
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            record(b, never, {"cost_usd": Decimal(1)})

    info = conn.execute("SELECT status, usage FROM runq.get_run(run_id => %s)", [run_id]).fetchone()
    assert info == ("succeeded", {"cost_usd": Decimal("0.5223001"), "input_tokens": 17, "credits": big,
                                  "output_tokens": 3})
    evs = [(int(e), t) for e, t in conn.execute("SELECT epoch, type FROM runq.run_events(run_id => %s)",
                                                [run_id]).fetchall()]
    assert evs == [(0, "run.created"), (1, "run.claimed"), (1, "run.usage"), (1, "run.requeued"),
                   (2, "run.claimed"), (1, "run.usage"), (1, "run.fenced"), (1, "run.usage"),
                   (2, "run.usage"), (2, "run.succeeded"), (2, "run.usage"), (2, "run.fenced")]
