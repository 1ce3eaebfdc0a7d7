"""Child runs under many threads, on a real server (docs/contract.md "Child runs").

Each test races real connections, in threads, on the rules that only
concurrency can break:

  * the last two children of a waiting parent ending at the same instant, in
    two sessions, requeue it exactly once (run.children_done once, attempts
    reset), whatever way each ends (complete, fail, complete_many, a cancel
    flag its worker meets);
  * wait_children racing the end of the parent's last live child never leaves
    the parent waiting with every child terminal;
  * a cancel, a complete or a fail of a parent racing its own spawns never
    leaves it terminal with a live child (a running child may only carry its
    cancel flag, as runq.cancel leaves a running run);
  * cascades and wakes never deadlock (40P01): parents ended two ways at once,
    and families of three levels, waiting at two, cancelled, completed, failed,
    heartbeaten after a cancel flag, swept for their leases and deadlines, all
    at once; after each round no live child under a terminal parent (but a
    running one flagged) and no parent waiting with every child terminal;
  * under the race gate's conditions (leases of 2 to 50 ms, a sweeper looping
    runq.sweep, the backoff a microsecond): a key gives one child across every
    epoch of its parent, and every spend any epoch of any run records, fenced or
    not, is in its own totals and every ancestor's exactly once;
  * a tenant limit of 1 with parents waiting for two children of that tenant:
    every family completes, a waiting parent holds no slot.

A round is one race: its families built in one session, then raced by several
behind a barrier. Each round's overlap is measured on the client (every call
began before any ended) and a share of rounds must overlap, so that a test
proves something about concurrency. Each test prints its seed; RUNQ_RACE_SEED
sets it. RUNQ_SOAK=1 runs twenty times the rounds.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from decimal import Context, Decimal, Inexact
from functools import partial
from typing import Any

import psycopg
import pytest
from pgutil import guard_thread
from psycopg.types.json import Jsonb, set_json_loads

SOAK = os.environ.get("RUNQ_SOAK") == "1"
SCALE = 20 if SOAK else 1
GIVE_UP_AFTER = 600.0 if SOAK else 60.0
# A test stops racing after this many errors: each deadlock costs the server's deadlock_timeout.
ENOUGH_ERRORS = 5

Connect = Callable[[], psycopg.Connection[Any]]

TERMINAL = ("succeeded", "failed", "cancelled")
ROOT, CHILD, LEAF = 10, 20, 30  # priority classes of the three levels (in each test's own database)
FAILURE = Jsonb({"code": "boom", "message": "failed on purpose"})

# The two invariants of a family, as of one snapshot.
ORPHANS = """
SELECT p.run_id, p.status, c.run_id, c.status, c.cancel_requested
  FROM runq.runs AS p JOIN runq.runs AS c ON c.parent_run_id = p.run_id
 WHERE p.status IN ('succeeded', 'failed', 'cancelled')
   AND c.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children')
   AND NOT (c.status = 'running' AND c.cancel_requested)
 ORDER BY 1, 3
"""
FORGOTTEN = """
SELECT p.run_id, (SELECT array_agg(c.status ORDER BY c.run_id) FROM runq.runs AS c
                   WHERE c.parent_run_id = p.run_id)
  FROM runq.runs AS p
 WHERE p.status = 'waiting_for_children'
   AND NOT EXISTS (SELECT FROM runq.runs AS c
                    WHERE c.parent_run_id = p.run_id
                      AND c.status IN ('queued', 'running', 'waiting_for_user', 'waiting_for_children'))
 ORDER BY 1
"""


# --------------------------------------------------------------------------
# calls


def submit(conn: psycopg.Connection[Any], tenant: str = "fam", priority: int = ROOT,
           max_attempts: int = 3) -> int:
    return int(conn.execute("SELECT run_id FROM runq.submit(%s, 'fam.root', priority => %s, max_attempts => %s)",
                            [tenant, priority, max_attempts]).fetchone()[0])


def claim(conn: psycopg.Connection[Any], classes: list[int], max_runs: int = 1,
          lease: str = "5 minutes") -> dict[int, int]:
    """run_id -> epoch of the runs claimed."""
    return {int(r): int(e) for r, e in conn.execute(
        "SELECT run_id, epoch FROM runq.claim(%s, 'test', %s::interval, %s)",
        [classes, lease, max_runs]).fetchall()}


def claim_run(conn: psycopg.Connection[Any], run_id: int, classes: list[int],
              lease: str = "5 minutes") -> int:
    """Claims the one queued run of these classes, which must be run_id: its epoch."""
    got = claim(conn, classes, lease=lease)
    assert list(got) == [run_id], (run_id, got)
    return got[run_id]


def spawn(conn: psycopg.Connection[Any], run_id: int, epoch: int, key: str, priority: int,
          kind: str = "fam.child", max_attempts: int = 3) -> int | None:
    got = conn.execute("SELECT runq.spawn(%s, %s, %s, %s, priority => %s, max_attempts => %s)",
                       [run_id, epoch, key, kind, priority, max_attempts]).fetchone()[0]
    return None if got is None else int(got)


def wait_children(conn: psycopg.Connection[Any], run_id: int, epoch: int) -> bool:
    return bool(conn.execute("SELECT runq.wait_children(%s, %s)", [run_id, epoch]).fetchone()[0])


def complete(conn: psycopg.Connection[Any], run_id: int, epoch: int) -> bool:
    return bool(conn.execute("SELECT runq.complete(%s, %s, '{}')", [run_id, epoch]).fetchone()[0])


def fail(conn: psycopg.Connection[Any], run_id: int, epoch: int) -> bool:
    return bool(conn.execute("SELECT runq.fail(%s, %s, %s)", [run_id, epoch, FAILURE]).fetchone()[0])


def complete_many(conn: psycopg.Connection[Any], run_id: int, epoch: int) -> bool:
    rows = conn.execute("SELECT run_id, completed FROM runq.complete_many(%s, %s)",
                        [[run_id], [epoch]]).fetchall()
    assert [int(r) for r, _ in rows] == [run_id], rows
    return bool(rows[0][1])


def heartbeat(conn: psycopg.Connection[Any], run_id: int, epoch: int) -> bool:
    return bool(conn.execute("SELECT runq.heartbeat(%s, %s)", [run_id, epoch]).fetchone()[0])


def cancel(conn: psycopg.Connection[Any], run_id: int) -> str:
    return str(conn.execute("SELECT runq.cancel(%s)", [run_id]).fetchone()[0])


def sweep(conn: psycopg.Connection[Any]) -> list[tuple[int, str]]:
    return [(int(r), str(a)) for r, a in conn.execute("SELECT run_id, action FROM runq.sweep()").fetchall()]


def run_row(conn: psycopg.Connection[Any], run_id: int) -> tuple[str, int, bool]:
    """(status, attempts, cancel_requested)."""
    s, a, c = conn.execute("SELECT status, attempts, cancel_requested FROM runq.runs WHERE run_id = %s",
                           [run_id]).fetchone()
    return str(s), int(a), bool(c)


def events(conn: psycopg.Connection[Any], run_id: int, type_: str) -> int:
    return int(conn.execute("SELECT count(*) FROM runq.run_events WHERE run_id = %s AND type = %s",
                            [run_id, type_]).fetchone()[0])


def seeded() -> tuple[int, random.Random]:
    """The test's seed (RUNQ_RACE_SEED, else a random one, printed) and its generator."""
    seed = int(os.environ.get("RUNQ_RACE_SEED", random.randrange(1 << 30)))
    return seed, random.Random(seed)


def drive_reclaim_to_zero(conn: psycopg.Connection[Any]) -> None:
    """A requeued run is claimable again a microsecond after its lease is swept."""
    conn.execute("UPDATE runq.settings SET backoff_base = interval '1 microsecond', "
                 "backoff_cap = interval '1 microsecond'")


def settle(conn: psycopg.Connection[Any], parent: int, epoch: int) -> None:
    """Ends a round's parent, so that the next round's claims find their own runs:
    claimed again (resumed) and completed when it was requeued, else cancelled."""
    if run_row(conn, parent)[0] == "queued":
        assert claim(conn, [ROOT]) == {parent: epoch + 1}
        assert complete(conn, parent, epoch + 1)
    else:
        cancel(conn, parent)


# --------------------------------------------------------------------------
# racing


def sqlstate(e: BaseException) -> str:
    return getattr(e, "sqlstate", None) or type(e).__name__


def race(calls: list[Callable[[], Any]]) -> tuple[list[Any], bool]:
    """Runs each call in a thread of its own, all released by one barrier: what
    each returned (or the exception it raised), and whether every call began
    before any ended (measured on the client)."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)
    spans: list[tuple[float, float]] = [(0.0, 0.0)] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        began = time.perf_counter()
        try:
            out[i] = calls[i]()
        except Exception as e:  # reported by the caller
            out[i] = e
        spans[i] = (began, time.perf_counter())

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a racing call never returned"
    return out, max(b for b, _ in spans) < min(e for _, e in spans)


def raised(results: Iterable[Any]) -> list[BaseException]:
    return [r for r in results if isinstance(r, BaseException)]


def report(errors: list[tuple[str, BaseException]], problems: list[str]) -> str:
    """What went wrong: the errors (describe()), then the violations of the rules."""
    return (describe(errors) if errors else "no errors") + (
        f"\n{len(problems)} violations:\n" + "\n".join(problems[:20]) if problems else "\nno violations")


def describe(errors: list[tuple[str, BaseException]]) -> str:
    """The errors by SQLSTATE (40P01 is a deadlock), then the first few in full."""
    states = Counter(sqlstate(e) for _, e in errors)
    return (f"{len(errors)} errors, by SQLSTATE {dict(states)}:\n"
            + "\n---\n".join(f"{what}: {e!r}"[:1500] for what, e in errors[:3]))


def check_families(conn: psycopg.Connection[Any]) -> list[str]:
    """The two invariants over the whole database."""
    problems = [f"run {c} is {cs} (cancel flag {f}) under run {p}, which is {ps}"
                for p, ps, c, cs, f in conn.execute(ORPHANS).fetchall()]
    problems += [f"run {p} waits for its children, all terminal: {st}"
                 for p, st in conn.execute(FORGOTTEN).fetchall()]
    return problems


# --------------------------------------------------------------------------
# 1. the last two children end at once: the parent is requeued once


WAYS = ("complete", "fail", "complete_many", "flagged")  # how a running child ends
ENDED_AS = {"complete": "succeeded", "fail": "failed", "complete_many": "succeeded", "flagged": "cancelled"}


def end_child(conn: psycopg.Connection[Any], way: str, run_id: int, epoch: int) -> bool:
    """Ends a running child the given way; "flagged": runq.cancel set its flag
    before the race, its worker's heartbeat ends it (false)."""
    if way == "complete":
        return complete(conn, run_id, epoch)
    if way == "fail":
        return fail(conn, run_id, epoch)
    if way == "complete_many":
        return complete_many(conn, run_id, epoch)
    assert way == "flagged", way
    return heartbeat(conn, run_id, epoch)


def test_last_two_children_ending_at_once_requeue_the_parent_once(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    """Each round: a parent waits for its two running children; two sessions
    end one child each at once, each way drawn from WAYS. The parent is then
    queued, its attempts reset to 0, with exactly one run.children_done; each
    child ended as its way says; no call raised (no 40P01)."""
    rounds = 300 * SCALE
    seed, rng = seeded()
    a, b = connect(), connect()
    overlapped = 0
    pairs: Counter[str] = Counter()
    problems: list[str] = []
    errors: list[tuple[str, BaseException]] = []
    started = time.monotonic()
    for n in range(rounds):
        if len(errors) >= ENOUGH_ERRORS:
            rounds = n  # those run
            break
        parent = submit(conn)
        pe = claim_run(conn, parent, [ROOT])
        kids = [spawn(conn, parent, pe, key, CHILD) for key in ("a", "b")]
        held = claim(conn, [CHILD], max_runs=2)
        assert sorted(held) == sorted(k for k in kids if k is not None), (kids, held)
        assert wait_children(conn, parent, pe)
        ways = (rng.choice(WAYS), rng.choice(WAYS))
        pairs[" + ".join(sorted(ways))] += 1
        for way, kid in zip(ways, held):
            if way == "flagged":
                assert cancel(conn, kid) == "cancel_requested"
        (ra, rb), both = race([partial(end_child, a, ways[0], *list(held.items())[0]),
                               partial(end_child, b, ways[1], *list(held.items())[1])])
        overlapped += both
        errors += [(f"round {n}, {ways}", e) for e in raised([ra, rb])]
        for way, kid, got in zip(ways, held, (ra, rb)):
            if isinstance(got, BaseException):
                continue
            status = run_row(conn, kid)[0]
            if got is not (way != "flagged") or status != ENDED_AS[way]:
                problems.append(f"round {n}: child {kid} ended by {way} returned {got}, is {status}")
        status, attempts, _ = run_row(conn, parent)
        done = events(conn, parent, "run.children_done")
        if (status, attempts, done) != ("queued", 0, 1):
            problems.append(f"round {n}: children ended by {ways}: parent {parent} is {status}, "
                            f"attempts {attempts}, {done} run.children_done")
        settle(conn, parent, pe)
    elapsed = time.monotonic() - started
    print(f"\n{rounds} rounds in {elapsed:.1f} s (seed {seed}), {overlapped} overlapped; ways {dict(pairs)}")
    assert not errors and not problems, report(errors, problems)
    assert overlapped >= rounds // 2, f"only {overlapped} of {rounds} rounds raced"


# --------------------------------------------------------------------------
# 2. wait_children against the end of the last live child


LAST_WAYS = ("complete", "fail", "complete_many", "cancel_queued")


def test_wait_children_racing_the_last_child_never_leaves_the_parent_waiting(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    """Each round: a running parent with 0 to 2 children already ended and one
    live, which one session ends (complete, fail, complete_many, or runq.cancel
    while it is still queued) while the parent's worker calls wait_children in
    another. Whichever wins, the parent ends the round queued, with one
    run.children_done: woken by the child (attempts reset) or by an empty wait
    (attempts kept); both outcomes must occur."""
    rounds = 300 * SCALE
    seed, rng = seeded()
    a, b = connect(), connect()
    overlapped = 0
    outcomes: Counter[str] = Counter()
    problems: list[str] = []
    errors: list[tuple[str, BaseException]] = []
    started = time.monotonic()
    for n in range(rounds):
        if len(errors) >= ENOUGH_ERRORS:
            rounds = n  # those run
            break
        parent = submit(conn)
        pe = claim_run(conn, parent, [ROOT])
        before = rng.randint(0, 2)  # children already ended before the race
        for k in range(before):
            kid = spawn(conn, parent, pe, f"done{k}", CHILD)
            assert kid is not None
            assert complete(conn, kid, claim_run(conn, kid, [CHILD]))
        last = spawn(conn, parent, pe, "last", CHILD)
        assert last is not None
        way = rng.choice(LAST_WAYS)
        end: Callable[[], Any]
        if way == "cancel_queued":
            end = partial(cancel, b, last)
        else:
            end = partial(end_child, b, way, last, claim_run(conn, last, [CHILD]))
        (waited, ended), both = race([partial(wait_children, a, parent, pe), end])
        overlapped += both
        errors += [(f"round {n}, {way}", e) for e in raised([waited, ended])]
        status, attempts, _ = run_row(conn, parent)
        done = events(conn, parent, "run.children_done")
        if waited is not True or ended not in (True, "cancelled"):
            problems.append(f"round {n}: wait_children returned {waited}, the child's end ({way}) {ended}")
        # Queued by the child's end (attempts reset), or at once by an empty wait (attempts kept).
        if status != "queued" or done != 1 or attempts not in (0, 1):
            problems.append(f"round {n}: the last child ended by {way} while the parent began to wait: "
                            f"parent {parent} is {status}, attempts {attempts}, {done} run.children_done")
        outcomes["woken by the child" if attempts == 0 else "empty wait"] += 1
        settle(conn, parent, pe)
    elapsed = time.monotonic() - started
    print(f"\n{rounds} rounds in {elapsed:.1f} s (seed {seed}), {overlapped} overlapped; {dict(outcomes)}")
    assert not errors and not problems, report(errors, problems)
    assert overlapped >= rounds // 2, f"only {overlapped} of {rounds} rounds raced"
    assert outcomes["woken by the child"] > 0 and outcomes["empty wait"] > 0, outcomes


# --------------------------------------------------------------------------
# 3. a parent's end racing its spawns


@pytest.mark.parametrize("ender", ["cancel", "complete", "fail"])
def test_a_parent_ending_while_it_spawns_leaves_no_live_child(
        conn: psycopg.Connection[Any], connect: Connect, ender: str) -> None:
    """Two threads spawn children of a running parent under its epoch, the same
    keys k0, k1, ... in the same order (an agent's parallel tool calls), each
    until spawn returns NULL; another ends the parent after a random pause
    (runq.cancel sets its flag, which the next spawn turns into cancelled; or
    the parent's worker completes or fails it); one more claims children as
    they appear, so that some are running when the parent ends. Afterwards the
    parent is terminal, each key gave one child (both spawners got it), and no
    child is live but a running one with its cancel flag."""
    rounds = 100 * SCALE
    seed, rng = seeded()
    spawners, ending, claimer = (connect(), connect()), connect(), connect()
    ended_as = {"cancel": "cancelled", "complete": "succeeded", "fail": "failed"}[ender]
    tally: Counter[str] = Counter()
    problems: list[str] = []
    errors: list[tuple[str, BaseException]] = []
    started = time.monotonic()
    for n in range(rounds):
        if len(errors) >= ENOUGH_ERRORS:
            rounds = n  # those run
            break
        parent = submit(conn)
        pe = claim_run(conn, parent, [ROOT])
        spawning = [threading.Event(), threading.Event()]
        pause = rng.uniform(0, 0.006)

        def spawn_until_refused(k: int, parent: int = parent, pe: int = pe,
                                done: threading.Event = spawning[0]) -> list[int | None]:
            got: list[int | None] = []
            try:
                while len(got) < 1000:
                    got.append(spawn(spawners[k], parent, pe, f"k{len(got)}", CHILD))
                    if got[-1] is None:
                        break
            finally:
                done.set()
            return got

        def end_parent(parent: int = parent, pe: int = pe, pause: float = pause) -> Any:
            time.sleep(pause)
            if ender == "cancel":
                return cancel(ending, parent)
            return complete(ending, parent, pe) if ender == "complete" else fail(ending, parent, pe)

        def claim_children(spawning: list[threading.Event] = spawning) -> int:
            claimed = 0
            while not all(e.is_set() for e in spawning):
                claimed += len(claim(claimer, [CHILD], max_runs=4))
            return claimed

        (s0, s1, end, claimed), _ = race([partial(spawn_until_refused, 0, done=spawning[0]),
                                          partial(spawn_until_refused, 1, done=spawning[1]),
                                          end_parent, claim_children])
        errors += [(f"round {n}", e) for e in raised([s0, s1, end, claimed])]
        if raised([s0, s1, end, claimed]):
            problems += [f"round {n}: {m}" for m in check_families(conn)]
            continue
        by_key: dict[int, set[int]] = defaultdict(set)
        for spawned in (s0, s1):
            if spawned[-1] is not None:
                problems.append(f"round {n}: {len(spawned)} spawns, none refused, after the parent's {ender} "
                                f"({end})")
            for k, kid in enumerate(spawned):
                if kid is not None:
                    by_key[k].add(kid)
        made = sorted(kid for kids in by_key.values() for kid in kids)
        if end not in (True, "cancel_requested"):
            problems.append(f"round {n}: the parent's {ender} returned {end}")
        status = run_row(conn, parent)[0]
        if status != ended_as:
            problems.append(f"round {n}: the parent is {status} after its {ender}")
        kids = dict(conn.execute("SELECT run_id, status FROM runq.runs WHERE parent_run_id = %s",
                                 [parent]).fetchall())
        if sorted(kids) != made or any(len(v) != 1 for v in by_key.values()):
            problems.append(f"round {n}: spawns returned {dict(by_key)} (key: children), the parent has "
                            f"children {sorted(kids)}")
        if events(conn, parent, "run.spawned") != len(kids):
            problems.append(f"round {n}: {events(conn, parent, 'run.spawned')} run.spawned for {len(kids)} "
                            "children")
        tally["children"] += len(kids)
        tally["keys both spawners got"] += sum(1 for x, y in zip(s0, s1) if x is not None and y is not None)
        tally["running then"] += claimed
        tally["rounds with children"] += bool(kids)
        tally.update(f"child {s}" for s in kids.values())
        problems += [f"round {n}: {m}" for m in check_families(conn)]
    elapsed = time.monotonic() - started
    flagged = int(conn.execute("SELECT count(*) FROM runq.runs WHERE parent_run_id IS NOT NULL"
                               " AND status = 'running' AND cancel_requested").fetchone()[0])
    print(f"\n{ender}: {rounds} rounds in {elapsed:.1f} s (seed {seed}); {dict(tally)}; {flagged} running "
          "children flagged")
    assert not errors and not problems, report(errors, problems)
    # The race was run: children were spawned before the end, some of them running and flagged
    # by it, and the queued ones cancelled with it.
    assert tally["rounds with children"] > rounds // 2, tally
    assert flagged > 0 and tally["child cancelled"] > 0, (flagged, tally)


# --------------------------------------------------------------------------
# 4. cascades and wakes never deadlock


def family(conn: psycopg.Connection[Any], rng: random.Random, base: int) -> dict[str, Any]:
    """A root waiting for its three children (classes base, base + 1, base + 2
    for the three levels, base + 3 for grandchildren left queued); each child
    running (some with a cancel flag), or waiting for its own two children;
    grandchildren queued or running. Leases of 2 ms to 5 minutes. Returns the
    runs, and the epochs of those running."""
    def lease() -> str:
        return rng.choice(["2 milliseconds", "10 milliseconds", "30 milliseconds", "5 minutes"])
    root = submit(conn, priority=base)
    re_ = claim_run(conn, root, [base])
    fam: dict[str, Any] = {"root": root, "children": [], "grandchildren": [], "epochs": {}}
    for i in range(3):
        kid = spawn(conn, root, re_, f"c{i}", base + 1)
        assert kid is not None
        ke = claim_run(conn, kid, [base + 1], lease=lease())
        fam["children"].append(kid)
        for j in range(2):
            running = rng.random() < 0.5  # else left queued, in a class of its own
            g = spawn(conn, kid, ke, f"g{j}", base + 2 + (not running), kind="fam.leaf")
            assert g is not None
            fam["grandchildren"].append(g)
            if running:
                fam["epochs"][g] = claim_run(conn, g, [base + 2], lease=lease())
        if rng.random() < 0.4:
            assert wait_children(conn, kid, ke)
        else:
            fam["epochs"][kid] = ke
            if rng.random() < 0.2:
                assert cancel(conn, kid) == "cancel_requested"
    assert wait_children(conn, root, re_)
    return fam


PAIRS = {
    # runq.cancel of a running parent with live children, and its worker's complete or fail
    "cancel a running parent vs its worker completes it": ("running root", "cancel root", "complete root"),
    "cancel a running parent vs its worker fails it": ("running root", "cancel root", "fail root"),
    # a waiting root cancelled while one of its children, with live children of its own, ends
    "cancel a waiting root vs its running child completes": ("waiting root", "cancel root", "complete child"),
    "cancel a waiting root vs its running child fails": ("waiting root", "cancel root", "fail child"),
    # the same, the child ended by the sweep: its lease lapsed under its cancel flag
    "cancel a waiting root vs the sweep cancels its flagged child": ("waiting root", "cancel root", "sweep"),
    # two children, each with live children of its own, ending at once under a waiting root
    "two children with children complete at once": ("waiting root", "complete child", "complete child 2"),
}


@pytest.mark.parametrize("pair", list(PAIRS))
def test_two_ends_in_one_family_at_once_never_deadlock(
        conn: psycopg.Connection[Any], connect: Connect, pair: str) -> None:
    """One family per round (a root, two running children, two grandchildren
    each, half of them running), two of its runs ended at once, each in a
    session of its own. Each run ended has live children: its end locks them
    (runq._cancel_children) while the other end locks them, or their parent,
    in its own order. No 40P01, and the family's invariants hold."""
    shape, first, second = PAIRS[pair]
    rounds = 60 * SCALE
    seed, rng = seeded()
    a, b = connect(), connect()
    overlapped = 0
    problems: list[str] = []
    errors: list[tuple[str, BaseException]] = []
    started = time.monotonic()
    for n in range(rounds):
        if len(errors) >= ENOUGH_ERRORS:
            rounds = n  # those run
            break
        base = 1000 + 4 * n  # the round's classes: what earlier rounds left is never claimed
        root = submit(conn, priority=base)
        re_ = claim_run(conn, root, [base])
        kids: list[tuple[int, int]] = []
        for i in range(2):
            kid = spawn(conn, root, re_, f"c{i}", base + 1)
            assert kid is not None
            ke = claim_run(conn, kid, [base + 1], lease="2 milliseconds" if second == "sweep" else "5 minutes")
            kids.append((kid, ke))
            for j in range(2):
                running = rng.random() < 0.5  # else left queued, in a class of its own
                g = spawn(conn, kid, ke, f"g{j}", base + 2 + (not running), kind="fam.leaf")
                assert g is not None
                if running:
                    claim_run(conn, g, [base + 2])
        if shape == "waiting root":
            assert wait_children(conn, root, re_)
        (kid, ke), (kid2, ke2) = kids
        if second == "sweep":
            assert cancel(conn, kid) == "cancel_requested"
            time.sleep(0.003)  # the children's leases lapse
        calls: dict[str, Callable[[], Any]] = {
            "cancel root": partial(cancel, a, root),
            "complete root": partial(complete, b, root, re_),
            "fail root": partial(fail, b, root, re_),
            "complete child": partial(complete, a if first == "complete child" else b, kid, ke),
            "fail child": partial(fail, b, kid, ke),
            "sweep": partial(sweep, b),
            "complete child 2": partial(complete, b, kid2, ke2),
        }
        results, both = race([calls[first], calls[second]])
        overlapped += both
        errors += [(f"round {n}: {pair}", e) for e in raised(results)]
        problems += [f"round {n}: {m}" for m in check_families(conn)]
    elapsed = time.monotonic() - started
    print(f"\n{pair}: {rounds} rounds in {elapsed:.1f} s (seed {seed}), {overlapped} overlapped")
    assert not errors and not problems, report(errors, problems)
    assert overlapped >= rounds // 2, f"only {overlapped} of {rounds} rounds raced"


Op = tuple[str, Callable[[psycopg.Connection[Any]], Any]]


def family_ops(fam: dict[str, Any], rng: random.Random, base: int) -> list[Op]:
    """What the round does to a family, each in any session: runq.cancel of the
    root and of three of its descendants; for each running run, its worker's
    complete, fail, heartbeat (which ends a flagged run) or wait_children; a
    worker that claims what was requeued in the family's classes and completes it."""
    ops: list[Op] = [("cancel root", partial(lambda c, r: cancel(c, r), r=fam["root"]))]
    for r in rng.sample(fam["children"] + fam["grandchildren"], 3):
        ops.append(("cancel", partial(lambda c, r: cancel(c, r), r=r)))
    for r, e in fam["epochs"].items():
        way = rng.choice(["complete", "complete", "fail", "heartbeat", "wait_children"])
        fn = {"complete": complete, "fail": fail, "heartbeat": heartbeat, "wait_children": wait_children}[way]
        ops.append((way, partial(lambda c, fn, r, e: fn(c, r, e), fn=fn, r=r, e=e)))
    ops.append(("claim and complete", partial(
        lambda c, classes: [complete(c, r, e) for r, e in claim(c, classes, max_runs=2).items()],
        classes=[base, base + 1, base + 2, base + 3])))
    return ops


def test_cascades_and_wakes_at_two_levels_never_deadlock(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    """Each round: four families of three levels (family()), roots waiting,
    children waiting or running (some flagged), and for half of the families a
    deadline that falls due during the round (set on the family's rows, as a
    root's timeout would nest). Then six sessions at once take the round's
    operations (family_ops()) in random orders, while one more session loops
    runq.sweep: it reclaims lapsed leases (cancelling flagged runs) and fails
    runs past their deadlines, waiting parents too. No 40P01, no error at all,
    and after each round no live child under a terminal parent (but a running
    one with its cancel flag) and no parent waiting with every child terminal."""
    families, threads_n, rounds = 4, 6, 25 * SCALE
    drive_reclaim_to_zero(conn)
    seed, rng = seeded()
    conns = [connect() for _ in range(threads_n)]
    sweeper_conn = connect()
    problems: list[str] = []
    errors: list[tuple[str, BaseException]] = []
    swept: Counter[str] = Counter()
    started = time.monotonic()
    for n in range(rounds):
        if len(errors) >= ENOUGH_ERRORS:
            rounds = n  # those run
            break
        ops: list[Op] = []
        for k in range(families):
            base = 1000 + 4 * (families * n + k)
            fam = family(conn, rng, base)
            if rng.random() < 0.5:
                ids = [fam["root"], *fam["children"], *fam["grandchildren"]]
                conn.execute("UPDATE runq.runs SET deadline = clock_timestamp() + %s * interval '1 millisecond'"
                             " WHERE run_id = ANY (%s)", [rng.uniform(0, 15), ids])
            ops += family_ops(fam, rng, base)
        rng.shuffle(ops)
        shares = [ops[i::threads_n] for i in range(threads_n)]
        stop = threading.Event()

        def sweeping() -> None:
            calls = 0
            while not stop.is_set() or calls == 0:
                try:
                    swept.update(a for _, a in sweep(sweeper_conn))
                except Exception as e:  # reported by the test
                    errors.append((f"round {n}: sweep", e))
                calls += 1
            swept["calls"] += calls

        def take(c: psycopg.Connection[Any], share: list[Op]) -> list[tuple[str, BaseException]]:
            failed: list[tuple[str, BaseException]] = []
            for what, op in share:
                try:
                    op(c)
                except Exception as e:  # reported by the test
                    failed.append((what, e))
            return failed

        sweeper = threading.Thread(target=sweeping, daemon=True)
        sweeper.start()
        results, _ = race([partial(take, c, s) for c, s in zip(conns, shares)])
        stop.set()
        sweeper.join(60)
        for r in results:
            if isinstance(r, BaseException):
                errors.append((f"round {n}", r))
            else:
                errors += [(f"round {n}: {what}", e) for what, e in r]
        problems += [f"round {n}: {m}" for m in check_families(conn)]
    elapsed = time.monotonic() - started
    seen = dict(conn.execute(
        """SELECT coalesce(payload ->> 'reason', type), count(*) FROM runq.run_events
            WHERE type IN ('run.cancelled', 'run.children_done', 'run.cancel_requested')
            GROUP BY 1""").fetchall())
    print(f"\n{rounds} rounds of {families} families, {threads_n} sessions and a sweeper, in {elapsed:.1f} s "
          f"(seed {seed}); events {seen}; sweep actions {dict(swept)}")
    assert not errors and not problems, report(errors, problems)
    # Every path ran: cascades (parent_finished), wakes (run.children_done), the sweep's deadlines and leases.
    assert seen.get("parent_finished", 0) > 0 and seen.get("run.children_done", 0) > 0, seen
    assert swept["deadline_exceeded"] > 0 and swept["cancelled"] + swept["requeued"] > 0, swept


# --------------------------------------------------------------------------
# 5. the race gate's conditions: one child per key, usage rolled up once


KIDS = {"fam.root": ("c0", "c1", "c2"), "fam.child": ("g0", "g1"), "fam.leaf": ()}
NEXT_KIND = {"fam.root": "fam.child", "fam.child": "fam.leaf"}
LEASES = ("2 milliseconds", "5 milliseconds", "20 milliseconds", "50 milliseconds")


# Sums in Python are exact too, or raise: a Decimal rounds to 28 digits by default.
EXACT = Context(prec=400, traps=[Inexact])


def random_usage(rng: random.Random) -> dict[str, Decimal]:
    """Exact amounts, credits beyond a float's precision."""
    usage = {"cost_usd": Decimal(rng.randrange(10**6)).scaleb(-6, EXACT),
             "input_tokens": Decimal(rng.randrange(5000))}
    if rng.random() < 0.3:
        usage["credits"] = Decimal(rng.randrange(10**40)).scaleb(-rng.randint(0, 20), EXACT)
    return usage


def usage_json(usage: dict[str, Decimal]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v:f}" for k, v in usage.items()) + "}"


def add(total: dict[str, Decimal], usage: dict[str, Any]) -> None:
    for k, v in usage.items():
        total[k] = EXACT.add(total.get(k, Decimal(0)), Decimal(v))


def test_keys_and_usage_roll_up_under_expiring_leases(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    """Four lanes (priority classes) of twelve trees (a root, three children,
    two grandchildren each), two workers a lane and a sweeper looping
    runq.sweep; every claim takes a lease of 2 to 50 ms, so leases lapse under
    parents and children alike and their runs are claimed again under the
    next epoch. A worker's
    claim: record_usage; a parent spawns its keys (the same request each
    epoch), then completes if every child is terminal, else waits for them; a
    leaf records more usage and completes. It stops at the first false (then,
    now and then, records usage once more: spent by a fenced epoch); after a
    complete, now and then, usage comes late. Afterwards: each key of each
    parent gave one child, in runq.spawns, runq.runs and the run.spawned events,
    and every spawn of it from every epoch returned that child; each run's usage
    totals equal, exactly, the sum of the run.usage events of its whole subtree,
    and the sum of what the workers sent to that subtree."""
    lanes, trees = 4, 12 * SCALE
    drive_reclaim_to_zero(conn)
    seed, _ = seeded()
    roots = {lane: [submit(conn, tenant=f"lane{lane}", priority=100 + lane, max_attempts=1000)
                    for _ in range(trees)] for lane in range(lanes)}
    lock = threading.Lock()
    sent: dict[int, dict[str, Decimal]] = defaultdict(dict)  # run -> the sum of every usage sent to it
    returned: dict[tuple[int, str], dict[int, set[int]]] = defaultdict(dict)  # (parent, key) -> child -> epochs
    tally: Counter[str] = Counter()
    stop = threading.Event()
    errors: list[BaseException] = []

    def record(c: psycopg.Connection[Any], run_id: int, epoch: int, rng: random.Random, when: str) -> bool:
        usage = random_usage(rng)
        ok = bool(c.execute("SELECT runq.record_usage(%s, %s, %s)",
                            [run_id, epoch, Jsonb(usage, dumps=usage_json)]).fetchone()[0])
        with lock:
            add(sent[run_id], usage)
            tally[f"usage {when} {'true' if ok else 'false'}"] += 1
        return ok

    def work(c: psycopg.Connection[Any], rng: random.Random, lane: int, run_id: int, epoch: int,
             kind: str) -> bool:
        if not record(c, run_id, epoch, rng, "step"):
            return False
        if rng.random() < 0.2:
            time.sleep(rng.uniform(0, 0.004))
        for key in KIDS[kind]:
            kid = spawn(c, run_id, epoch, key, 100 + lane, kind=NEXT_KIND[kind], max_attempts=1000)
            if kid is None:
                return False
            with lock:
                by_kid = returned[(run_id, key)]
                tally["spawns"] += 1
                tally["spawns from a later epoch"] += bool(by_kid) and epoch > min(
                    min(e) for e in by_kid.values())
                by_kid.setdefault(kid, set()).add(epoch)
        if KIDS[kind]:
            statuses = [s for (s,) in c.execute("SELECT status FROM runq.children(%s)", [run_id]).fetchall()]
            if any(s not in TERMINAL for s in statuses):
                return wait_children(c, run_id, epoch)
        elif not record(c, run_id, epoch, rng, "step"):
            return False
        if not complete(c, run_id, epoch):
            return False
        if rng.random() < 0.3:
            record(c, run_id, epoch, rng, "late")  # the run has finished: spend is still recorded
        return True

    def worker(lane: int, k: int) -> None:
        c = connect()
        rng = random.Random(seed + 2 * lane + k)
        while not stop.is_set():
            row = c.execute("SELECT run_id, epoch, kind FROM runq.claim(%s, %s, %s::interval)",
                            [[100 + lane], f"w{lane}.{k}", rng.choice(LEASES)]).fetchone()
            if row is None:
                time.sleep(0.001)
                continue
            run_id, epoch, kind = int(row[0]), int(row[1]), str(row[2])
            with lock:
                tally["claims"] += 1
            if not work(c, rng, lane, run_id, epoch, kind) and rng.random() < 0.5:
                record(c, run_id, epoch, rng, "zombie")  # fenced, or stopped: spend is still recorded

    def sweeper() -> None:
        c = connect()
        while not stop.is_set():
            actions = [a for _, a in sweep(c)]
            with lock:
                tally.update(actions)

    threads = [threading.Thread(target=guard_thread(partial(worker, lane, k), errors, stop), daemon=True)
               for lane in range(lanes) for k in range(2)]
    threads.append(threading.Thread(target=guard_thread(sweeper, errors, stop), daemon=True))
    started = time.monotonic()
    for t in threads:
        t.start()
    all_roots = [r for rs in roots.values() for r in rs]
    left = len(all_roots)
    try:
        while not stop.is_set() and time.monotonic() < started + GIVE_UP_AFTER:
            left = int(conn.execute("SELECT count(*) FROM runq.runs WHERE run_id = ANY (%s)"
                                    " AND status NOT IN ('succeeded', 'failed', 'cancelled')",
                                    [all_roots]).fetchone()[0])
            if left == 0:
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    elapsed = time.monotonic() - started
    assert not errors, describe([("worker", e) for e in errors])
    assert left == 0, f"{left} roots never ended in {GIVE_UP_AFTER:.0f} s"

    # One child per key: every spawn of a key, from every epoch, returned one run, which is the
    # key's row of runq.spawns, a child of its parent in runq.runs, and one run.spawned.
    problems: list[str] = []
    for (parent, key), by_kid in returned.items():
        if len(by_kid) != 1:
            problems.append(f"run {parent} key {key}: spawns returned {by_kid} (child: epochs)")
    spawns: dict[int, dict[str, int]] = defaultdict(dict)
    for p, key, kid in conn.execute("SELECT parent_run_id, key, run_id FROM runq.spawns").fetchall():
        spawns[int(p)][str(key)] = int(kid)
    children: dict[int, set[int]] = defaultdict(set)
    for p, kid in conn.execute("SELECT parent_run_id, run_id FROM runq.runs WHERE parent_run_id IS NOT NULL"):
        children[int(p)].add(int(kid))
    logged: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for p, key, kid in conn.execute("SELECT run_id, payload ->> 'key', (payload ->> 'run_id')::bigint"
                                    "  FROM runq.run_events WHERE type = 'run.spawned'").fetchall():
        logged[int(p)].append((str(key), int(kid)))
    for (parent, key), by_kid in returned.items():
        if spawns[parent].get(key) not in by_kid:
            problems.append(f"run {parent} key {key}: runq.spawns has {spawns[parent].get(key)}, spawn returned "
                            f"{sorted(by_kid)}")
    for parent in set(spawns) | set(children) | set(logged):
        if set(spawns[parent].values()) != children[parent] or sorted(logged[parent]) != sorted(
                spawns[parent].items()):
            problems.append(f"run {parent}: runq.spawns {spawns[parent]}, children {sorted(children[parent])}, "
                            f"run.spawned {logged[parent]}")

    # Usage rolled up once: totals = the subtree's run.usage events = what was sent to the subtree.
    set_json_loads(lambda data: json.loads(data, parse_float=Decimal), conn)
    own: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for r, payload in conn.execute("SELECT run_id, payload FROM runq.run_events WHERE type = 'run.usage'"):
        add(own[int(r)], payload)
    tree_of: dict[int, list[int]] = defaultdict(list)

    def subtree(r: int) -> list[int]:
        if r not in tree_of:
            tree_of[r] = [r] + [d for kid in sorted(children[r]) for d in subtree(kid)]
        return tree_of[r]

    runs = [int(r) for (r,) in conn.execute("SELECT run_id FROM runq.runs ORDER BY run_id").fetchall()]
    statuses = Counter(str(s) for (s,) in conn.execute("SELECT status FROM runq.runs").fetchall())
    for r in runs:
        totals = conn.execute("SELECT usage FROM runq.get_run(%s)", [r]).fetchone()[0] or {}
        in_events: dict[str, Decimal] = {}
        from_workers: dict[str, Decimal] = {}
        for d in subtree(r):
            add(in_events, own[d])
            add(from_workers, sent[d])
        if not (totals == in_events == from_workers):
            problems.append(f"run {r}: totals {totals}, its subtree's run.usage events {in_events}, "
                            f"sent {from_workers}")
    print(f"\n{len(runs)} runs of {len(all_roots)} trees in {elapsed:.1f} s (seed {seed}), statuses "
          f"{dict(statuses)}; {dict(tally)}")
    assert len(runs) == len(all_roots) * 10, len(runs)
    assert not problems, f"{len(problems)} violations (seed {seed}):\n" + "\n".join(problems[:20])
    # The gate tested something: keys spawned again from later epochs, usage from fenced epochs
    # and after the end, leases reclaimed by the sweep.
    assert tally["spawns from a later epoch"] > 0 and tally["requeued"] > 0, tally
    assert tally["usage zombie false"] > 0 and tally["usage late false"] > 0, tally


# --------------------------------------------------------------------------
# 6. a tenant limit of 1 and a parent waiting for two children of its tenant


def test_a_waiting_parent_holds_no_slot_of_its_tenant_limit(
        conn: psycopg.Connection[Any], connect: Connect) -> None:
    """Every tenant limited to 1 running run; four tenants with five parents
    each, every parent spawning two children of its tenant and waiting
    for them. Four workers claim and run everything; a monitor counts the
    running runs per tenant without pause. Every family completes (a waiting
    parent that kept its tenant's one slot would leave its children parked for
    ever), no count exceeds 1, and a tenant was seen with a parent waiting while
    its child ran."""
    tenants, parents, workers_n = 4, 5 * SCALE, 4
    conn.execute("SELECT runq.set_limit('tenant', NULL, 1)")
    all_parents = [submit(conn, tenant=f"t{t}") for t in range(tenants) for _ in range(parents)]
    stop = threading.Event()
    errors: list[BaseException] = []
    lock = threading.Lock()
    seen: Counter[str] = Counter()

    def worker(k: int) -> None:
        c = connect()
        rng = random.Random(k)
        while not stop.is_set():
            got = c.execute("SELECT run_id, epoch, kind FROM runq.claim(%s, %s)",
                            [[ROOT], f"w{k}"]).fetchone()
            if got is None:
                time.sleep(0.001)
                continue
            run_id, epoch, kind = int(got[0]), int(got[1]), str(got[2])
            time.sleep(rng.uniform(0, 0.003))
            if kind == "fam.root":
                for key in ("a", "b"):
                    assert spawn(c, run_id, epoch, key, ROOT) is not None
                statuses = [s for (s,) in c.execute("SELECT status FROM runq.children(%s)", [run_id])]
                if any(s not in TERMINAL for s in statuses):
                    assert wait_children(c, run_id, epoch)
                    with lock:
                        seen["waits"] += 1
                    continue
            assert complete(c, run_id, epoch)
            with lock:
                seen[f"{kind} completed"] += 1

    def monitor() -> None:
        c = connect()
        while not stop.is_set():
            for tenant, running, waiting in c.execute(
                    """SELECT tenant_id, count(*) FILTER (WHERE status = 'running'),
                              count(*) FILTER (WHERE status = 'waiting_for_children')
                         FROM runq.runs GROUP BY tenant_id""").fetchall():
                assert running <= 1, f"tenant {tenant} has {running} runs running"
                with lock:
                    seen["a child ran while its tenant's parent waited"] += running == 1 and waiting > 0

    threads = [threading.Thread(target=guard_thread(partial(worker, k), errors, stop), daemon=True)
               for k in range(workers_n)]
    threads.append(threading.Thread(target=guard_thread(monitor, errors, stop), daemon=True))
    started = time.monotonic()
    for t in threads:
        t.start()
    left = len(all_parents)
    try:
        while not stop.is_set() and time.monotonic() < started + GIVE_UP_AFTER:
            left = int(conn.execute("SELECT count(*) FROM runq.runs WHERE status <> 'succeeded'").fetchone()[0])
            if left == 0:
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    elapsed = time.monotonic() - started
    assert not errors, describe([("thread", e) for e in errors])
    stuck = conn.execute("SELECT run_id, tenant_id, kind, status, parked FROM runq.runs"
                         " WHERE status <> 'succeeded' ORDER BY run_id").fetchall()
    assert left == 0, f"runs that never ended in {GIVE_UP_AFTER:.0f} s: {stuck}"
    print(f"\n{len(all_parents)} families under a tenant limit of 1 in {elapsed:.1f} s: {dict(seen)}")
    assert seen["fam.root completed"] == len(all_parents) and seen["fam.child completed"] == 2 * len(all_parents)
    assert all(events(conn, p, "run.children_done") == 1 for p in all_parents)
    assert seen["a child ran while its tenant's parent waited"] > 0, seen
