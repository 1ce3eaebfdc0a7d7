"""Concurrency limits and pauses under many threads, on a real server.

The rule (docs/contract.md, "Concurrency limits"): no interleaving of claims
ever lets a tenant's (or a kind's) running count exceed its limit, and a run
skipped for a limit keeps its place and is run once its key has room.

Shape of the main test: a default tenant limit of 2 and a kind limit of 3 on
one kind; WORKERS threads, each with its own connection, claim with a random
class set, kind filter and batch size, and end each run in a random way
(complete, fail, release, ask_user then an input, cancel); submitters add runs
while they do, and a sweeper sweeps. After every claim the worker counts the
running runs per tenant and kind in a statement of its own (a snapshot that
sees every committed claim), and a monitor thread counts without pause; no
count may exceed its limit. At the end every run is terminal, every run that
succeeded did so once, and the event log agrees with what the workers did.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from functools import partial

import psycopg
from pgutil import guard_thread
from psycopg.types.json import Jsonb
from runq.pool import RunContext, Slot, WorkerPool

TENANTS = [f"t{i}" for i in range(5)]
KINDS = ["k0", "k1"]
TENANT_LIMIT = 2
KIND_LIMIT = 3  # on k1 only
WORKERS = 12
RUNS_AT_START = 300
RUNS_SUBMITTED_DURING = 150
GIVE_UP_AFTER = 120.0

COUNTS = """
SELECT (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM runq.runs
         WHERE status = 'running' GROUP BY tenant_id) AS t),
       (SELECT count(*) FROM runq.runs WHERE status = 'running' AND kind = 'k1')
"""


def submit_some(conn: psycopg.Connection, n: int, rng: random.Random) -> None:
    for _ in range(n):
        conn.execute("SELECT runq.submit(%s, %s, priority => %s)",
                     [rng.choice(TENANTS), rng.choice(KINDS), rng.choice([0, 10])])


def test_limits_never_exceeded_and_every_run_ends_once(connect: Callable[[], psycopg.Connection]):
    admin = connect()
    admin.execute("SELECT runq.set_limit('tenant', NULL, %s)", [TENANT_LIMIT])
    admin.execute("SELECT runq.set_limit('kind', 'k1', %s)", [KIND_LIMIT])
    submit_some(admin, RUNS_AT_START, random.Random(1))

    stop = threading.Event()
    errors: list[BaseException] = []
    worst: Counter[str] = Counter()
    claims = Counter[str]()
    outcomes: Counter[str] = Counter()
    completed: list[int] = []
    asked: list[int] = []
    lock = threading.Lock()

    def note_counts(conn: psycopg.Connection) -> None:
        per_tenant, k1 = conn.execute(COUNTS).fetchone()
        with lock:
            worst["tenant"] = max(worst["tenant"], per_tenant)
            worst["kind"] = max(worst["kind"], k1)
        assert per_tenant <= TENANT_LIMIT, f"a tenant has {per_tenant} runs running"
        assert k1 <= KIND_LIMIT, f"kind k1 has {k1} runs running"

    guarded = partial(guard_thread, errors=errors, stop=stop)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        conn = connect()
        while not stop.is_set():
            classes = rng.choice([[0], [10], [0, 10]])
            kinds = rng.choice([None, ["k0"], ["k1"], ["k0", "k1"]])
            rows = conn.execute(
                "SELECT run_id, epoch FROM runq.claim(%s, %s, interval '30 seconds', %s, %s)",
                [classes, f"w{seed}", rng.randint(1, 3), kinds]).fetchall()
            note_counts(conn)
            if not rows:
                time.sleep(0.002)
                continue
            with lock:
                claims["claims"] += len(rows)
            time.sleep(rng.random() * 0.01)
            for run_id, epoch in rows:
                way = rng.choices(["complete", "fail", "release", "ask", "cancel"],
                                  [70, 5, 10, 10, 5])[0]
                if way == "complete":
                    ok = conn.execute("SELECT runq.complete(%s, %s, '{}')", [run_id, epoch]).fetchone()[0]
                    if ok:
                        with lock:
                            completed.append(run_id)
                elif way == "fail":
                    ok = conn.execute("SELECT runq.fail(%s, %s, %s)",
                                      [run_id, epoch, Jsonb({"code": "boom", "message": "m",
                                                             "retryable": True})]).fetchone()[0]
                elif way == "release":
                    ok = conn.execute("SELECT runq.release(%s, %s)", [run_id, epoch]).fetchone()[0]
                elif way == "ask":
                    ok = conn.execute("SELECT runq.ask_user(%s, %s, '{\"q\": 1}')",
                                      [run_id, epoch]).fetchone()[0]
                    if ok:
                        with lock:
                            asked.append(run_id)
                else:
                    conn.execute("SELECT runq.cancel(%s)", [run_id])
                    ok = conn.execute("SELECT runq.heartbeat(%s, %s)", [run_id, epoch]).fetchone()[0]
                assert ok is not None
                with lock:
                    outcomes[way] += 1

    def answerer() -> None:
        conn = connect()
        while not stop.is_set():
            with lock:
                run_id = asked.pop() if asked else None
            if run_id is None:
                time.sleep(0.005)
                continue
            conn.execute("SELECT runq.deliver_input(%s, '{\"a\": 1}')", [run_id])

    def submitter(seed: int) -> None:
        rng = random.Random(seed)
        conn = connect()
        for _ in range(RUNS_SUBMITTED_DURING // 2):
            if stop.is_set():
                return
            submit_some(conn, 1, rng)
            time.sleep(0.005)

    def sweeper() -> None:
        conn = connect()
        while not stop.is_set():
            conn.execute("SELECT count(*) FROM runq.sweep()")
            time.sleep(0.02)

    def monitor() -> None:
        conn = connect()
        while not stop.is_set():
            note_counts(conn)

    threads = ([threading.Thread(target=guarded(lambda s=s: worker(s))) for s in range(WORKERS)]
               + [threading.Thread(target=guarded(lambda s=s: submitter(s))) for s in (100, 101)]
               + [threading.Thread(target=guarded(f)) for f in (answerer, sweeper, monitor)])
    for t in threads:
        t.start()
    # Runs fail for good after max_attempts (3) and some are cancelled; the
    # rest succeed. Wait for every run to be terminal.
    deadline = time.monotonic() + GIVE_UP_AFTER
    total = RUNS_AT_START + RUNS_SUBMITTED_DURING
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            left, made = admin.execute(
                """SELECT count(*) FILTER (WHERE status NOT IN ('succeeded', 'failed', 'cancelled')),
                          count(*) FROM runq.runs""").fetchone()
            if left == 0 and made == total:
                break
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[0]
    statuses = dict(admin.execute(
        "SELECT status, count(*) FROM runq.runs GROUP BY status").fetchall())
    assert sum(statuses.values()) == total
    assert set(statuses) <= {"succeeded", "failed", "cancelled"}, statuses

    # Every run that succeeded did so exactly once, under the epoch of the
    # worker that completed it, and no run was claimed by two workers at once.
    assert len(completed) == len(set(completed)) == statuses.get("succeeded", 0)
    assert admin.execute(
        """SELECT count(*) FROM (SELECT run_id FROM runq.run_events WHERE type = 'run.succeeded'
                                  GROUP BY run_id HAVING count(*) > 1) AS twice""").fetchone()[0] == 0
    assert admin.execute(
        "SELECT count(*) FROM runq.run_events WHERE type = 'run.claimed'").fetchone()[0] == claims["claims"]
    assert worst["tenant"] == TENANT_LIMIT, worst  # the limit was reached, and held
    assert worst["kind"] <= KIND_LIMIT
    print(f"\n{claims['claims']} claims by {WORKERS} workers, outcomes {dict(outcomes)}, "
          f"statuses {statuses}, most running at once: per tenant {worst['tenant']}, "
          f"kind k1 {worst['kind']}")


def test_a_saturated_tenant_never_blocks_another(connect: Callable[[], psycopg.Connection]):
    # Tenant a at its limit with a deep backlog ahead of b's runs in the same
    # class: b's runs are claimed by the same workers, at once, while a's wait.
    admin = connect()
    admin.execute("SELECT runq.set_limit('tenant', 'a', 2)")
    admin.execute("SELECT count(*) FROM generate_series(1, 2000) AS g, LATERAL runq.submit('a', 'k', jsonb_build_object('n', g))")
    admin.execute("SELECT count(*) FROM generate_series(1, 20) AS g, LATERAL runq.submit('b', 'k', jsonb_build_object('n', g))")
    workers = [connect() for _ in range(8)]
    got: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def claim_all(conn: psycopg.Connection) -> None:
        while True:
            rows = conn.execute("SELECT tenant_id, run_id, epoch FROM runq.claim('{10}')").fetchall()
            if not rows:
                return
            with lock:
                got.extend(rows)

    threads = [threading.Thread(target=claim_all, args=(c,)) for c in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    tenants = Counter(t for t, _, _ in got)
    assert tenants == {"a": 2, "b": 20}, tenants
    # a's oldest two ran; then each completion admits a's next oldest.
    a_runs = sorted(r for t, r, _ in got if t == "a")
    assert a_runs == [r for (r,) in admin.execute(
        "SELECT run_id FROM runq.runs WHERE tenant_id = 'a' ORDER BY run_id LIMIT 2").fetchall()]
    for _, run_id, epoch in [g for g in got if g[0] == "a"]:
        admin.execute("SELECT runq.complete(%s, %s)", [run_id, epoch])
    nxt = admin.execute("SELECT run_id FROM runq.claim('{10}', max_runs => 5)").fetchall()
    assert [r for (r,) in nxt] == [r for (r,) in admin.execute(
        "SELECT run_id FROM runq.runs WHERE tenant_id = 'a' AND status = 'running' ORDER BY run_id"
    ).fetchall()] == [a_runs[-1] + 1, a_runs[-1] + 2]


def claim_calls(conn: psycopg.Connection) -> int:
    return conn.execute(
        """SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
            WHERE schemaname = 'runq' AND funcname = 'claim'""").fetchone()[0]


def test_pool_does_not_spin_when_all_it_may_claim_is_paused_or_limited(db_url: str, connect):
    # Every queued run the pool has a handler for is held: tenant p paused,
    # tenant q at its limit with the slot taken by a run nobody completes.
    # The pool must wait on LISTEN and its poll interval, not claim in a loop;
    # resume must wake it at once.
    admin = connect()
    admin.execute("SELECT set_config('track_functions', 'pl', false)")
    dbname = admin.info.dbname
    admin.execute(f'ALTER DATABASE "{dbname}" SET track_functions = \'pl\'')  # test-only: the pool's sessions
    admin.execute("SELECT runq.set_limit('tenant', 'q', 1)")
    admin.execute("SELECT runq.pause('tenant', 'p')")
    admin.execute("SELECT count(*) FROM generate_series(1, 50) AS g, LATERAL runq.submit('p', 'job', jsonb_build_object('n', g))")
    admin.execute("SELECT count(*) FROM generate_series(1, 50) AS g, LATERAL runq.submit('q', 'job', jsonb_build_object('n', g))")
    held = admin.execute("SELECT run_id FROM runq.claim('{10}', 'holder', interval '1 hour')").fetchone()[0]
    admin.execute("SELECT pg_stat_reset()")

    done: list[int] = []

    def job(ctx: RunContext) -> None:
        done.append(ctx.run_id)

    poll = 0.5
    pool = WorkerPool(db_url, {"job": job}, [Slot((10,), 4)], poll_interval=poll, sweep_interval=None)
    pool.start()
    try:
        time.sleep(3.0)
        assert done == []
        resumed_at = time.monotonic()
        admin.execute("SELECT runq.resume('tenant', 'p')")
        deadline = time.monotonic() + 10
        while len(done) < 50 and time.monotonic() < deadline:
            time.sleep(0.02)
        first_wait = time.monotonic() - resumed_at
        assert len(done) == 50, len(done)
    finally:
        pool.stop()
        pool.join()
    time.sleep(0.5)  # a backend flushes its function statistics as it exits
    calls = claim_calls(admin)
    # 3 s idle at one poll per 0.5 s per class set, then 50 runs four at a time:
    # tens of calls. A pool that spun would have made thousands.
    print(f"\n{calls} claim calls in 3 s of held work and the 50 runs after resume "
          f"(all done {first_wait:.2f} s after resume); the held run is {held}")
    assert calls < 60, calls
    assert first_wait < 5 * poll
    assert admin.execute("SELECT count(*) FROM runq.runs WHERE tenant_id = 'q' AND status = 'running'"
                         ).fetchone()[0] == 1  # q stays at its limit: the holder's run


def test_no_run_enters_the_queue_under_repeatable_read_while_limits_or_pauses_are_set(connect):
    # A count read with a snapshot older than the key's lock could admit past a
    # limit, or under a pause committed since: such a submit is refused with
    # 25000, and changes nothing. Without limits or pauses it goes on as before.
    admin, client = connect(), connect()

    def submit_repeatable_read() -> str:
        client.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        try:
            client.execute("SELECT runq.submit('rr', 'k')")
            client.execute("COMMIT")
            return "created"
        except psycopg.errors.InvalidTransactionState as e:
            client.execute("ROLLBACK")
            assert "repeatable read" in str(e), e
            return e.sqlstate or ""

    assert submit_repeatable_read() == "created"
    admin.execute("SELECT runq.set_limit('tenant', 'other', 5)")
    assert submit_repeatable_read() == "25000"
    admin.execute("SELECT runq.set_limit('tenant', 'other', NULL)")
    admin.execute("SELECT runq.pause('kind', 'elsewhere')")
    assert submit_repeatable_read() == "25000"
    admin.execute("SELECT runq.resume('kind', 'elsewhere')")
    assert submit_repeatable_read() == "created"
    assert admin.execute("SELECT count(*) FROM runq.runs WHERE tenant_id = 'rr'").fetchone()[0] == 2
