"""runq.complete_and_claim under many threads, on a real server.

A worker that finishes a run and takes the next in one call must keep every
rule the two calls keep apart: a fenced completion is never applied (the run
keeps the result of the epoch that held it when it succeeded), a run succeeds
once, a limit is never exceeded, and a fenced worker takes nothing more unless
it asks to.

WORKERS threads loop on complete_and_claim with leases short enough that some
expire while the worker sleeps past them; a sweeper requeues those runs, so
another worker claims them under a newer epoch, and the first one's
completion comes back false. Each result names the worker and the epoch that
wrote it. Twice: with every tenant limited to TENANT_LIMIT running runs (a
monitor counts them without pause), the completion and the claim as two
statements; with no limit set, the usual call, whose completion and claim
are one UPDATE (the fast path).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial

import psycopg
import pytest
from pgutil import guard_thread
from psycopg.types.json import Jsonb

TENANTS = [f"t{i}" for i in range(4)]
TENANT_LIMIT = 2
WORKERS = 10
RUNS = 400
GIVE_UP_AFTER = 120.0

CALL = """SELECT completed, run_id, epoch
            FROM runq.complete_and_claim(%s, %s, %s, ARRAY[10], %s, %s, %s,
                                         claim_if_fenced => %s)"""


def function_calls(conn: psycopg.Connection, made: int) -> dict[str, int]:
    """runq's functions and their calls, once the workers' made calls of
    complete_and_claim are all counted (each session sends its counts as it
    exits)."""
    for _ in range(200):
        conn.execute("SELECT pg_stat_clear_snapshot()")
        calls = dict(conn.execute("""SELECT funcname, calls FROM pg_stat_user_functions
                                      WHERE schemaname = 'runq'""").fetchall())
        if calls.get("complete_and_claim", 0) >= made:
            break
        time.sleep(0.05)
    return calls


@pytest.mark.parametrize("limited", [True, False], ids=["tenant limit", "no limit, fast path"])
def test_one_call_a_cycle_keeps_fencing_limits_and_once(
        connect: Callable[[], psycopg.Connection], limited: bool):
    admin = connect()
    # The workers' sessions count their PL/pgSQL calls: the fast path never
    # calls runq.complete; complete then claim always does.
    admin.execute(f'ALTER DATABASE "{admin.info.dbname}" SET track_functions = \'pl\'')  # test-only
    if limited:
        admin.execute("SELECT runq.set_limit('tenant', NULL, %s)", [TENANT_LIMIT])
    # An expired lease's run is claimable again at once, not seconds later.
    admin.execute("UPDATE runq.settings SET backoff_base = '1 millisecond', backoff_cap = '1 millisecond'")
    admin.execute("""SELECT count(*) FROM generate_series(1, %s) AS g,
                     LATERAL runq.submit('t' || g %% 4, 'k', max_attempts => 1000)""", [RUNS])

    stop = threading.Event()
    errors: list[BaseException] = []
    lock = threading.Lock()
    seen = Counter[str]()
    worst = [0]
    applied: dict[int, tuple[str, int]] = {}  # run -> (worker, epoch) whose completion answered true
    fenced: set[tuple[int, int]] = set()  # (run, epoch) whose completion answered false

    guarded = partial(guard_thread, errors=errors, stop=stop)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        conn = connect()
        name = f"w{seed}"
        held: list[tuple[int, int]] = []
        while not stop.is_set():
            done = held.pop() if held else (None, None)
            if done[0] is not None:
                # Usually well inside the lease; now and then past it.
                time.sleep(rng.choice([0] * 8 + [0.001, 0.3]))
            asked_if_fenced = rng.random() < 0.3
            rows = conn.execute(CALL, [done[0], done[1], Jsonb({"by": name, "epoch": done[1]}),
                                       name, "200 milliseconds", rng.randint(1, 3),
                                       asked_if_fenced]).fetchall()
            completed = rows[0][0]
            claimed = [(r, e) for _, r, e in rows if r is not None]
            assert all(c is completed for c, _, _ in rows)
            with lock:
                if completed is True:
                    assert done[0] not in applied, f"run {done[0]} completed twice"
                    applied[done[0]] = (name, done[1])
                elif completed is False:
                    fenced.add(done)
                    seen["fenced"] += 1
                    assert not claimed or asked_if_fenced, "a fenced completion claimed"
                seen["claimed"] += len(claimed)
                seen["calls"] += 1
            held.extend(claimed)
            if not claimed and not held:
                time.sleep(0.002)
        conn.close()  # its function statistics are flushed as it exits

    def sweeper() -> None:
        conn = connect()
        while not stop.is_set():
            conn.execute("SELECT count(*) FROM runq.sweep()")
            time.sleep(0.01)

    def monitor() -> None:
        conn = connect()
        while not stop.is_set():
            most = conn.execute("""SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM runq.runs
                                    WHERE status = 'running' GROUP BY tenant_id) AS t""").fetchone()[0]
            assert most <= TENANT_LIMIT or not limited, f"a tenant has {most} runs running"
            worst[0] = max(worst[0], most)

    threads = ([threading.Thread(target=guarded(lambda s=s: worker(s))) for s in range(WORKERS)]
               + [threading.Thread(target=guarded(f)) for f in (sweeper, monitor)])
    for t in threads:
        t.start()
    deadline = time.monotonic() + GIVE_UP_AFTER
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            if admin.execute("SELECT count(*) FROM runq.runs WHERE status <> 'succeeded'").fetchone()[0] == 0:
                break
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[0]

    runs = admin.execute("SELECT run_id, status, lease_epoch, result FROM runq.runs").fetchall()
    assert len(runs) == RUNS and {s for _, s, _, _ in runs} == {"succeeded"}
    # Each run succeeded once, by the completion that answered true, under
    # the epoch that held it last; no fenced completion left its result.
    assert set(applied) == {r for r, _, _, _ in runs}
    for run_id, _, epoch, result in runs:
        by, at = applied[run_id]
        assert result == {"by": by, "epoch": at} and at == epoch, (run_id, result, applied[run_id])
    assert admin.execute("""SELECT count(*) FROM runq.run_events WHERE type = 'run.succeeded'
                            GROUP BY run_id HAVING count(*) > 1""").fetchall() == []
    # Each fenced completion logged its run.fenced, once per run and epoch.
    logged = set(admin.execute("SELECT run_id, epoch FROM runq.run_events"
                               " WHERE type = 'run.fenced'").fetchall())
    assert fenced <= logged
    assert seen["fenced"] > 0, "no lease ever expired under a worker: the test tested no fencing"
    if limited:
        assert worst[0] == TENANT_LIMIT, worst  # the limit was reached, and held
    else:
        assert worst[0] > TENANT_LIMIT, worst  # unlimited: the workers ran side by side
    calls = function_calls(admin, seen["calls"])
    assert calls.get("complete_and_claim", 0) == seen["calls"], (calls, seen)
    assert calls.get("claim", 0) > 0, calls
    if limited:
        assert calls.get("complete", 0) > 0, calls  # complete, then claim
    else:
        assert calls.get("complete", 0) == 0, calls  # every completion took the fast path
    print(f"\n{seen['claimed']} claims, {seen['fenced']} fenced completions, "
          f"at most {worst[0]} running per tenant")
