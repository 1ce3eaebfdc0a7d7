"""runq.record_model_call under the race gate's conditions: leases of 2 ms,
a sweeper requeueing them as soon as they lapse (backoff a microsecond), and
two workers per lane claiming the same runs again and again.

Each worker claims a run, reads its journal (runq.model_calls) as a resuming
agent loop does, and journals the requests after the applied ones (seq n
always with hash h<n>), each with exact usage, until the fifth, then
completes the run; it stops at the first false (some make one more call
anyway, as a zombie would). Afterwards, per run:

  * each seq is applied once at most, and the applied seqs are 1..n;
  * no record_model_call raised: a worker that resumed found every row
    applied before its claim, so it never sent a request to replay (RQ004);
  * an applied row was written while its epoch held the run: before the
    next epoch's claim;
  * a row not applied was written after its epoch lost the run (after a
    run.requeued of that epoch, or the run's end), and is kept;
  * the run's usage totals are the sum, exactly, of every row's usage:
    applied or not, each once.
"""
from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

LANES = 6
RUNS_PER_LANE = 60
REQUESTS = 5
LEASE = "2 milliseconds"
GIVE_UP_AFTER = 300.0

Connect = Callable[[], psycopg.Connection[Any]]


def usage(rng: random.Random) -> Jsonb:
    """Exact amounts, each written out as a JSON number."""
    amounts = {"cost_usd": Decimal(rng.randrange(10**6)).scaleb(-6),
               "input_tokens": Decimal(rng.randrange(5000))}
    return Jsonb(amounts, dumps=lambda d: "{" + ", ".join(f'"{k}": {v:f}' for k, v in d.items())
                 + "}")


def worker(conn: psycopg.Connection[Any], lane: int, name: str, stop: threading.Event,
           errors: list[BaseException], seed: int) -> None:
    rng = random.Random(seed)
    try:
        while not stop.is_set():
            row = conn.execute("SELECT run_id, epoch FROM runq.claim(%s, %s, %s)",
                               [[200 + lane], name, LEASE]).fetchone()
            if row is None:
                time.sleep(0.0005)
                continue
            run_id, epoch = row
            [(applied,)] = conn.execute(
                "SELECT coalesce(max(seq), 0) FROM runq.model_calls(%s) WHERE applied",
                [run_id]).fetchall()
            seq = applied
            while True:
                if rng.random() < 0.2:
                    time.sleep(rng.uniform(0, 0.004))
                seq += 1
                [(ours,)] = conn.execute(
                    "SELECT runq.record_model_call(%s, %s, %s, %s, %s, %s)",
                    [run_id, epoch, seq, f"h{seq}", Jsonb({"by": name, "epoch": epoch}),
                     usage(rng)]).fetchall()
                if not ours:
                    if rng.random() < 0.3:  # a zombie's one more call
                        conn.execute("SELECT runq.record_model_call(%s, %s, %s, %s, %s, %s)",
                                     [run_id, epoch, seq + 1, f"h{seq + 1}", Jsonb({}),
                                      usage(rng)])
                    break
                if seq >= REQUESTS:
                    conn.execute("SELECT runq.complete(%s, %s, NULL)", [run_id, epoch])
                    break
    except BaseException as error:  # reported by the test
        errors.append(error)
        stop.set()


def test_journal_under_expiring_leases(conn: psycopg.Connection[Any], connect: Connect) -> None:
    conn.execute("UPDATE runq.settings SET backoff_base = interval '1 microsecond',"
                 " backoff_cap = interval '1 microsecond'")
    for lane in range(LANES):
        conn.execute("SELECT runq.submit('mcc', 'k', priority => %s, max_attempts => 1000)"
                     " FROM generate_series(1, %s)", [200 + lane, RUNS_PER_LANE])
    stop, errors = threading.Event(), []
    threads = [threading.Thread(target=worker, args=(connect(), lane, f"w{lane}-{i}", stop, errors,
                                                     lane * 2 + i), daemon=True)
               for lane in range(LANES) for i in range(2)]
    sweeper_conn = connect()

    def sweeper() -> None:
        while not stop.is_set():
            sweeper_conn.execute("SELECT runq.sweep()")

    threads.append(threading.Thread(target=sweeper, daemon=True))
    for t in threads:
        t.start()
    deadline = time.monotonic() + GIVE_UP_AFTER
    while not stop.is_set() and time.monotonic() < deadline:
        [(left,)] = conn.execute("SELECT count(*) FROM runq.runs WHERE tenant_id = 'mcc'"
                                 " AND status NOT IN ('succeeded', 'failed')").fetchall()
        if left == 0:
            break
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert left == 0, f"{left} runs never ended"

    rows: dict[int, list[tuple[int, int, bool, datetime, Any]]] = defaultdict(list)
    for r, s, e, a, at, u in conn.execute(
            "SELECT r.run_id, m.seq, m.epoch, m.applied, m.created_at, m.usage"
            "  FROM runq.runs AS r, runq.model_calls(r.run_id) AS m"
            " WHERE r.tenant_id = 'mcc'").fetchall():
        rows[r].append((s, e, a, at, u))
    lost: dict[tuple[int, int], datetime] = {}  # (run, epoch) -> when it lost the run
    for r, e, at in conn.execute(
            "SELECT e.run_id, e.epoch, e.created_at FROM runq.run_events AS e"
            "  JOIN runq.runs AS r USING (run_id)"
            " WHERE r.tenant_id = 'mcc' AND e.type IN ('run.requeued', 'run.succeeded',"
            "       'run.failed') ORDER BY e.created_at").fetchall():
        lost.setdefault((r, e), at)
    # An event's created_at may be read before its statement waited for a
    # lock (the sweep's is), so an applied row is checked against the next
    # claim: a claim sees the run queued only once the requeue committed,
    # which the row's lock made wait for the row's commit.
    claimed = {(r, e): at for r, e, at in conn.execute(
        "SELECT e.run_id, e.epoch, e.created_at FROM runq.run_events AS e"
        "  JOIN runq.runs AS r USING (run_id)"
        " WHERE r.tenant_id = 'mcc' AND e.type = 'run.claimed'").fetchall()}
    ended = {r: f for r, f in conn.execute(
        "SELECT run_id, finished_at FROM runq.runs WHERE tenant_id = 'mcc'").fetchall()}
    fenced = 0
    for run_id, journal in rows.items():
        applied = sorted(s for s, _, a, _, _ in journal if a)
        assert applied == list(range(1, len(applied) + 1)), (run_id, journal)
        for s, e, a, at, _ in journal:
            if a:
                assert (run_id, e + 1) not in claimed or at < claimed[(run_id, e + 1)], (
                    run_id, s, e)
            else:
                fenced += 1
                assert (run_id, e) in lost and lost[(run_id, e)] < at or ended[run_id] < at, (
                    run_id, s, e)
        [(totals,)] = conn.execute("SELECT usage FROM runq.get_run(%s)", [run_id]).fetchall()
        summed: dict[str, Decimal] = defaultdict(Decimal)
        for *_, u in journal:
            for k, v in u.items():
                summed[k] += Decimal(str(v))
        assert {k: Decimal(str(v)) for k, v in totals.items()} == summed, run_id
    # The race was run: stale writers were refused, and runs completed.
    assert fenced > 0
    [(succeeded,)] = conn.execute("SELECT count(*) FROM runq.runs WHERE tenant_id = 'mcc'"
                                  " AND status = 'succeeded'").fetchall()
    assert succeeded > 0
