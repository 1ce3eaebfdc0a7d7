"""Many sweepers at once decide each run exactly once.

Four connections call runq.sweep at the same moment over 2,000 runs whose
leases have expired (plus queued runs past their queue TTL), spread over every
rule of the contract so that every action name is exercised:

    resume, attempts left        -> requeued
    resume, attempts exhausted   -> dead_lettered  (failed, max_attempts_exceeded)
    recovery_policy 'fail'       -> orphaned       (failed, orphaned)
    cancel requested             -> cancelled
    zero_work, no work done      -> requeued
    queued past its queue_ttl    -> expired        (failed, queue_ttl_expired)

Across all sweepers' returned rows each run must appear exactly once with its
expected action, and its event log must hold exactly one matching event.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
import pytest

SWEEPERS = 4
PER_GROUP = 400  # 5 groups of expired leases: 2,000 runs
TTL_RUNS = 200
GATE_WAIT = 30.0
GATE_KEY = 4242

Connect = Callable[[], psycopg.Connection[Any]]

# group -> (submit arguments, expected action, expected event types, expected status, failure code)
GROUPS: dict[str, tuple[dict[str, Any], str, list[str], str, str | None]] = {
    "resume": (dict(recovery_policy="resume", max_attempts=3), "requeued",
               ["run.created", "run.claimed", "run.requeued"], "queued", None),
    "exhausted": (dict(recovery_policy="resume", max_attempts=1), "dead_lettered",
                  ["run.created", "run.claimed", "run.failed"], "failed", "max_attempts_exceeded"),
    "fail_policy": (dict(recovery_policy="fail", max_attempts=3), "orphaned",
                    ["run.created", "run.claimed", "run.failed"], "failed", "orphaned"),
    "cancel": (dict(recovery_policy="resume", max_attempts=3), "cancelled",
               ["run.created", "run.claimed", "run.cancel_requested", "run.cancelled"], "cancelled", None),
    "zero_work": (dict(recovery_policy="zero_work", max_attempts=3), "requeued",
                  ["run.created", "run.claimed", "run.requeued"], "queued", None),
}
DECISION_EVENT = {"requeued": "run.requeued", "dead_lettered": "run.failed", "orphaned": "run.failed",
                  "cancelled": "run.cancelled", "expired": "run.failed"}


def submit_many(conn: psycopg.Connection[Any], n: int, group: str, priority: int, **args: Any) -> list[int]:
    """n runq.submit calls in one statement; each submit is its own call of the public function."""
    named = "".join(f", {k} => %({k})s" for k in args)
    rows = conn.execute(
        f"""
        SELECT s.run_id
          FROM pg_catalog.generate_series(1, %(n)s) AS g(i),
               LATERAL runq.submit(tenant_id => 'sweepers', kind => 'sweep.test',
                                   payload => pg_catalog.jsonb_build_object('group', %(group)s::text, 'i', g.i),
                                   priority => %(priority)s{named}) AS s
         ORDER BY g.i
        """,
        dict(n=n, group=group, priority=priority, **args),
    ).fetchall()
    assert len(rows) == n
    return [int(r[0]) for r in rows]


def wait_db_clock_past(conn: psycopg.Connection[Any], instant: Any) -> None:
    while not conn.execute("SELECT pg_catalog.clock_timestamp() > %s", [instant]).fetchone()[0]:
        conn.execute("SELECT pg_catalog.pg_sleep(0.005)")


@pytest.mark.parametrize("batch", [10, 1000])
def test_four_sweepers_decide_each_expired_run_once(conn: psycopg.Connection[Any], connect: Connect,
                                                    batch: int) -> None:
    # ---- 2,000 running runs with expired leases, 200 queued runs past their TTL
    expected: dict[int, str] = {}
    for group, (args, *_rest) in GROUPS.items():
        for run_id in submit_many(conn, PER_GROUP, group, 10, **args):
            expected[run_id] = group
    for run_id in submit_many(conn, TTL_RUNS, "ttl", 20, queue_ttl=timedelta(milliseconds=1)):
        expected[run_id] = "ttl"

    claimed = conn.execute(
        "SELECT run_id, epoch, lease_expires_at FROM runq.claim(classes => %s, worker_id => 'doomed', "
        "lease => %s, max_runs => %s)",
        [[10], timedelta(milliseconds=1), len(GROUPS) * PER_GROUP],
    ).fetchall()
    assert sorted(int(r[0]) for r in claimed) == sorted(r for r, g in expected.items() if g != "ttl")
    assert {int(r[1]) for r in claimed} == {1}

    cancel_ids = [r for r, g in expected.items() if g == "cancel"]
    answers = conn.execute("SELECT runq.cancel(run_id => c.id, reason => 'test') FROM unnest(%s::bigint[]) AS c(id)",
                           [cancel_ids]).fetchall()
    assert {a[0] for a in answers} == {"cancel_requested"}

    wait_db_clock_past(conn, max(r[2] for r in claimed))
    ttl_deadline = conn.execute(
        "SELECT max(i.created_at) + interval '1 millisecond' "
        "FROM unnest(%s::bigint[]) AS t(id), LATERAL runq.get_run(run_id => t.id) AS i",
        [[r for r, g in expected.items() if g == "ttl"]]).fetchone()[0]
    wait_db_clock_past(conn, ttl_deadline)

    # ---- four sweepers released at once
    sweepers = [connect() for _ in range(SWEEPERS)]
    conn.execute("SELECT pg_advisory_lock(%s)", [GATE_KEY])

    def sweep_until_dry(c: psycopg.Connection[Any]) -> list[tuple[int, str]]:
        c.execute("SELECT pg_advisory_lock_shared(%s)", [GATE_KEY])
        c.execute("SELECT pg_advisory_unlock_shared(%s)", [GATE_KEY])
        got: list[tuple[int, str]] = []
        while True:
            rows = c.execute("SELECT run_id, action FROM runq.sweep(max_runs => %s)", [batch]).fetchall()
            if not rows:
                return got
            got.extend((int(r[0]), str(r[1])) for r in rows)

    with ThreadPoolExecutor(max_workers=SWEEPERS) as pool:
        futures = [pool.submit(sweep_until_dry, c) for c in sweepers]
        deadline = time.monotonic() + GATE_WAIT
        while conn.execute(
                "SELECT count(*) FROM pg_catalog.pg_locks AS l WHERE l.locktype = 'advisory' AND NOT l.granted "
                "AND l.objid::bigint = %s AND l.database = (SELECT d.oid FROM pg_catalog.pg_database AS d "
                "WHERE d.datname = pg_catalog.current_database())", [GATE_KEY]).fetchone()[0] < SWEEPERS:
            for f in futures:
                if f.done():
                    f.result()
            assert time.monotonic() < deadline, "the sweepers never all reached the gate"
            time.sleep(0.005)
        conn.execute("SELECT pg_advisory_unlock(%s)", [GATE_KEY])
        per_sweeper = [f.result() for f in futures]

    print("rows decided per sweeper:", [len(rows) for rows in per_sweeper])

    # ---- each run decided exactly once, with the action its rule gives
    all_rows = [row for rows in per_sweeper for row in rows]
    times = Counter(run_id for run_id, _ in all_rows)
    unknown = set(times) - set(expected)
    assert not unknown, f"sweep returned runs it was never given: {sorted(unknown)[:10]}"
    twice = {r: n for r, n in times.items() if n != 1}
    assert not twice, f"{len(twice)} runs decided more than once, e.g. {list(twice.items())[:10]}"
    missing = set(expected) - set(times)
    assert not missing, f"{len(missing)} runs never decided, e.g. {sorted(missing)[:10]}"

    action_of = dict(all_rows)
    expected_action = {g: spec[1] for g, spec in GROUPS.items()} | {"ttl": "expired"}
    wrong = [(r, expected[r], action_of[r]) for r in expected if action_of[r] != expected_action[expected[r]]]
    assert not wrong, f"{len(wrong)} runs got the wrong action, e.g. {wrong[:10]}"

    assert conn.execute("SELECT run_id, action FROM runq.sweep()").fetchall() == [], "a later sweep still found work"

    # ---- exactly one matching event per run, and the run in the state its action says
    rows = conn.execute(
        """
        SELECT t.id, e.epoch, e.type, e.ord
          FROM unnest(%s::bigint[]) AS t(id),
               LATERAL runq.run_events(run_id => t.id)
                   WITH ORDINALITY AS e(event_id, epoch, type, payload, created_at, ord)
         ORDER BY t.id, e.ord
        """, [list(expected)]).fetchall()
    log: dict[int, list[tuple[int, str]]] = {r: [] for r in expected}
    for run_id, epoch, type_, _ in rows:
        log[int(run_id)].append((int(epoch), str(type_)))

    infos = {int(r[0]): r for r in conn.execute(
        """
        SELECT t.id, i.status, i.failure ->> 'code', i.lease_epoch, i.attempts
          FROM unnest(%s::bigint[]) AS t(id), LATERAL runq.get_run(run_id => t.id) AS i
        """, [list(expected)]).fetchall()}

    problems: list[str] = []
    for run_id, group in expected.items():
        action = action_of[run_id]
        decision = DECISION_EVENT[action]
        types = [t for _, t in log[run_id]]
        matching = [(ep, t) for ep, t in log[run_id] if t == decision]
        if group == "ttl":
            want_types, want_status, want_code = ["run.created", "run.failed"], "failed", "queue_ttl_expired"
            want_epoch = 0
        else:
            _, _, want_types, want_status, want_code = GROUPS[group]
            want_epoch = 1
        if len(matching) != 1:
            problems.append(f"run {run_id} ({group}, {action}): {len(matching)} {decision} events: {types}")
        elif matching[0][0] != want_epoch:
            problems.append(f"run {run_id} ({group}): {decision} carries epoch {matching[0][0]}, not {want_epoch}")
        if types != want_types:
            problems.append(f"run {run_id} ({group}): events {types}, expected {want_types}")
        _, status, code, lease_epoch, _attempts = infos[run_id]
        if (status, code) != (want_status, want_code):
            problems.append(f"run {run_id} ({group}): status {status} code {code}, expected {want_status} {want_code}")
        if lease_epoch != want_epoch:
            problems.append(f"run {run_id} ({group}): lease_epoch {lease_epoch}, expected {want_epoch}")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
