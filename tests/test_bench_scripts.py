"""The benchmark's scripts measure what they say they measure.

bench/run.py is not run in CI (it takes minutes and its figures are ratios,
not pass/fail), so these tests keep its parts from rotting: every pgbench
script runs against the references and runq without an error, and a cycle of
each queue does its whole job: a claim and a completion per run, and for the
floor and runq one event per transition under the claimed epoch (runq's one
call a cycle too: complete_and_claim; and claimed 10 at a time, completed
in one call, with the minimal queue batched the same way). The batched
part's scripts beat only running runs under their epoch, and complete each run
of their pool once (one found done would return false and cost less). The
cost part's: record_usage and checkpoint apply to running runs under their
epoch (never fenced), cycles of runs with a budget and a timeout end every run
succeeded, and its sweep over runs with deadlines none due changes nothing. The other
drivers run in small: bench/cpu.py, bench/instructions.py,
bench/long_runs.py (one worker process holding runs for 18 s, not minutes) and
bench/waiting.py (30 waits and 30 runs streaming for 2 s), bench/agents.py
(8 runs of each variant, a 10-request conversation) and bench/children.py
(60 children, 2 reps).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pgutil import PG_BIN, ROOT, psql

PGBENCH = PG_BIN / "pgbench"
BENCH = ROOT / "bench"
CYCLES = 50


@pytest.fixture
def bench_url(db_url: str) -> str:
    psql(db_url, "-f", str(BENCH / "references.sql"))
    return db_url


def pgbench(url: str, script: str, transactions: int, clients: int = 1, **defines: int) -> None:
    args = [str(PGBENCH), "-n", "-M", "prepared", "-c", str(clients), "-t", str(transactions),
            "-f", str(BENCH / script)]
    for k, v in {"clients": clients, **defines}.items():  # the batched scripts share runs out
        args += ["-D", f"{k}={v}"]
    out = subprocess.run(args + [url], capture_output=True, text=True)
    assert out.returncode == 0 and "aborted" not in out.stdout, out.stdout + out.stderr
    assert f"number of transactions actually processed: {transactions * clients}/" in out.stdout


def load_queue(conn: psycopg.Connection, table: str, n: int) -> None:
    conn.execute(sql.SQL("INSERT INTO {} (state) SELECT 0 FROM generate_series(1, %s)")
                 .format(sql.Identifier(table)), (n,))


def test_minimal_queue_cycle_claims_and_finishes_each_row(bench_url: str, conn: psycopg.Connection) -> None:
    load_queue(conn, "bench_minq", CYCLES + 10)
    pgbench(bench_url, "cycle_minq.pgbench", CYCLES)
    assert conn.execute("SELECT state, count(*) FROM bench_minq GROUP BY 1 ORDER BY 1").fetchall() \
        == [(0, 10), (2, CYCLES)]


def test_floor_cycle_fences_and_logs_each_transition(bench_url: str, conn: psycopg.Connection) -> None:
    load_queue(conn, "bench_floor", CYCLES + 10)
    pgbench(bench_url, "cycle_floor.pgbench", CYCLES)
    assert conn.execute("SELECT state, count(*) FROM bench_floor GROUP BY 1 ORDER BY 1").fetchall() \
        == [(0, 10), (2, CYCLES)]
    events = conn.execute("SELECT e.type, count(*) FROM bench_floor_events AS e"
                          " JOIN bench_floor AS q ON q.id = e.run_id AND q.epoch = e.epoch"
                          " GROUP BY 1 ORDER BY 1").fetchall()
    assert events == [("run.claimed", CYCLES), ("run.succeeded", CYCLES)]
    # The fence holds: a completion under a stale epoch changes nothing.
    run_id, epoch = conn.execute("SELECT * FROM bench_floor_claim()").fetchone()
    assert conn.execute("SELECT bench_floor_complete(%s, %s)", (run_id, epoch - 1)).fetchone()[0] is False
    assert conn.execute("SELECT state FROM bench_floor WHERE id = %s", (run_id,)).fetchone()[0] == 1
    assert conn.execute("SELECT bench_floor_complete(%s, %s)", (run_id, epoch)).fetchone()[0] is True


def test_floor_functions_are_definer_with_pinned_search_path(bench_url: str, conn: psycopg.Connection) -> None:
    rows = conn.execute("SELECT proname, prosecdef, proconfig FROM pg_proc"
                        " WHERE proname LIKE 'bench_floor_%' ORDER BY 1").fetchall()
    assert rows == [(name, True, ["search_path=pg_catalog, pg_temp"])
                    for name in ("bench_floor_claim", "bench_floor_complete",
                                 "bench_floor_heartbeat")]


def test_floor_heartbeat_extends_only_the_holders_lease(bench_url: str,
                                                       conn: psycopg.Connection) -> None:
    load_queue(conn, "bench_floor", 2)
    run_id, epoch = conn.execute("SELECT * FROM bench_floor_claim()").fetchone()
    beat = "SELECT bench_floor_heartbeat(%s, %s)"
    lease = "SELECT lease_expires_at FROM bench_floor WHERE id = %s"
    assert conn.execute(beat, (run_id, epoch - 1)).fetchone()[0] is False
    assert conn.execute(lease, (run_id,)).fetchone()[0] is None
    assert conn.execute(beat, (run_id, epoch)).fetchone()[0] is True
    assert conn.execute(lease, (run_id,)).fetchone()[0] is not None
    # a run nobody holds (still queued) has no lease to extend
    assert conn.execute(beat, (run_id + 1, 0)).fetchone()[0] is False


def test_runq_cycle_claims_and_completes_each_run(bench_url: str, conn: psycopg.Connection) -> None:
    load_runs(conn, 2 * CYCLES + 10, priority=10)
    pgbench(bench_url, "cycle_runq.pgbench", CYCLES, clients=2)
    assert conn.execute("SELECT status::text, count(*) FROM runq.runs GROUP BY 1 ORDER BY 1").fetchall() \
        == [("queued", 10), ("succeeded", 2 * CYCLES)]
    events = conn.execute("SELECT e.type::text, count(*) FROM runq.run_events AS e"
                          " JOIN runq.runs AS r ON r.run_id = e.run_id AND r.lease_epoch = e.epoch"
                          " GROUP BY 1 ORDER BY 1").fetchall()
    assert events == [("run.claimed", 2 * CYCLES), ("run.succeeded", 2 * CYCLES)]


def test_runq_one_call_cycle_completes_each_run_it_claims(bench_url: str,
                                                          conn: psycopg.Connection) -> None:
    load_runs(conn, 2 * CYCLES + 10, priority=10)
    pgbench(bench_url, "cycle_one_runq.pgbench", CYCLES, clients=2, started=0)
    # Each client's first call only claims, and its last leaves a run running.
    assert conn.execute("SELECT status::text, count(*) FROM runq.runs GROUP BY 1 ORDER BY 1").fetchall() \
        == [("queued", 10), ("running", 2), ("succeeded", 2 * CYCLES - 2)]
    events = conn.execute("SELECT e.type::text, count(*) FROM runq.run_events AS e"
                          " JOIN runq.runs AS r ON r.run_id = e.run_id AND r.lease_epoch = e.epoch"
                          " GROUP BY 1 ORDER BY 1").fetchall()
    assert events == [("run.claimed", 2 * CYCLES), ("run.succeeded", 2 * CYCLES - 2)]


def test_batched_cycles_finish_each_row_they_claim(bench_url: str, conn: psycopg.Connection) -> None:
    # Two clients, CYCLES cycles of 10 runs each, 25 runs left over.
    load_queue(conn, "bench_minq", 20 * CYCLES + 25)
    pgbench(bench_url, "cycle_batch_minq.pgbench", CYCLES, clients=2, batch=10)
    assert conn.execute("SELECT state, count(*) FROM bench_minq GROUP BY 1 ORDER BY 1").fetchall() \
        == [(0, 25), (2, 20 * CYCLES)]
    load_runs(conn, 20 * CYCLES + 25, priority=10)
    pgbench(bench_url, "cycle_batch_runq.pgbench", CYCLES, clients=2, batch=10)
    assert conn.execute("SELECT status::text, count(*) FROM runq.runs GROUP BY 1 ORDER BY 1").fetchall() \
        == [("queued", 25), ("succeeded", 20 * CYCLES)]
    events = conn.execute("SELECT e.type::text, count(*) FROM runq.run_events AS e"
                          " JOIN runq.runs AS r ON r.run_id = e.run_id AND r.lease_epoch = e.epoch"
                          " GROUP BY 1 ORDER BY 1").fetchall()
    assert events == [("run.claimed", 20 * CYCLES), ("run.succeeded", 20 * CYCLES)]


def test_other_scripts_run(bench_url: str, conn: psycopg.Connection) -> None:
    pgbench(bench_url, "ceiling.pgbench", CYCLES)
    load_runs(conn, CYCLES, priority=0)
    pgbench(bench_url, "claim_interactive.pgbench", CYCLES)
    conn.execute("INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)"
                 " SELECT clock_timestamp(), now(), 0, 'bench', k"
                 " FROM unnest(ARRAY['bench.other', 'bench.mine']) AS k,"
                 " generate_series(1, %s)", (CYCLES,))
    pgbench(bench_url, "claim_kind.pgbench", CYCLES)
    pgbench(bench_url, "heartbeat.pgbench", CYCLES, runs=CYCLES)
    pgbench(bench_url, "submit_one.pgbench", 5)
    pgbench(bench_url, "submit_batch.pgbench", 2)
    pgbench(bench_url, "submit_later.pgbench", 5)
    assert conn.execute("SELECT count(*) FROM runq.runs WHERE status = 'running'"
                        " AND lease_epoch = 1 AND priority = 0 AND kind = 'bench.cycle'").fetchone()[0] == CYCLES
    assert conn.execute("SELECT count(*), count(scheduled_for) FROM runq.runs"
                        " WHERE kind = 'bench.submit'").fetchone() == (210, 5)
    # claim_kind.pgbench took every run of its kind and none of the older other kind.
    assert conn.execute("SELECT kind::text, status::text, count(*) FROM runq.runs"
                        " WHERE kind IN ('bench.other', 'bench.mine') GROUP BY 1, 2 ORDER BY 1").fetchall() \
        == [("bench.mine", "running", CYCLES), ("bench.other", "queued", CYCLES)]


def claimed_runs(conn: psycopg.Connection, n: int) -> None:
    """Runs 1..n, running under epoch 1, as bench/run.py's batched part sets them up."""
    conn.execute("TRUNCATE runq.runs, runq.run_events RESTART IDENTITY CASCADE")
    load_runs(conn, n, priority=10)
    assert conn.execute("SELECT count(*) FROM runq.claim(ARRAY[10], 'bench', interval '1 hour', %s)"
                        " WHERE epoch = 1", (n,)).fetchone()[0] == n


def test_batched_heartbeats_beat_each_clients_own_runs(bench_url: str, conn: psycopg.Connection) -> None:
    claimed_runs(conn, 200)
    since = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    # Each client's share is one batch: one call each beats every run, once.
    pgbench(bench_url, "heartbeat_many.pgbench", 1, clients=2, runs=200, batch=100)
    assert conn.execute("SELECT count(*) FROM runq.runs WHERE status = 'running'"
                        " AND heartbeat_at > %s", (since,)).fetchone()[0] == 200
    pgbench(bench_url, "heartbeat_one.pgbench", CYCLES, clients=2, runs=200)
    assert conn.execute("SELECT type::text, count(*) FROM runq.run_events GROUP BY 1").fetchall() \
        == [("run.claimed", 200)]


@pytest.mark.parametrize("script, batch", [("complete_one.pgbench", 1), ("complete_many.pgbench", 10)])
def test_completes_finish_each_run_of_the_pool_once(bench_url: str, conn: psycopg.Connection,
                                                     script: str, batch: int) -> None:
    # A complete finding its run already done would return false and cost
    # less: the calls must name every run of the pool exactly once.
    pool = 2 * 5 * 10
    claimed_runs(conn, pool + 10)
    pgbench(bench_url, script, pool // (2 * batch), clients=2, runs=pool, batch=batch, calls=0)
    assert conn.execute("SELECT array_agg(run_id ORDER BY run_id) FROM runq.runs"
                        " WHERE status = 'succeeded'").fetchone()[0] == list(range(1, pool + 1))
    assert conn.execute("SELECT type::text, count(*) FROM runq.run_events WHERE epoch = 1"
                        " GROUP BY 1 ORDER BY 1").fetchall() \
        == [("run.claimed", pool + 10), ("run.succeeded", pool)]


def load_runs(conn: psycopg.Connection, n: int, priority: int, budget: str | None = None,
              timeout: str | None = None) -> None:
    """As bench/run.py's load_runq: the deadline created_at + timeout."""
    conn.execute("INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind, budget,"
                 " timeout, deadline)"
                 " SELECT t, now(), %(p)s, 'bench', 'bench.cycle', %(b)s::jsonb, %(t)s::interval,"
                 " t + %(t)s::interval"
                 " FROM (SELECT g, clock_timestamp() AS t FROM generate_series(1, %(n)s) AS g"
                 " OFFSET 0) AS s", {"p": priority, "n": n, "b": budget, "t": timeout})


def test_ledger_writes_apply_to_each_clients_own_runs(bench_url: str, conn: psycopg.Connection) -> None:
    # record_usage beside checkpoint: both must apply (a fenced call returns false and
    # costs less), on running runs under their epoch, and usage sums exactly.
    claimed_runs(conn, 200)
    pgbench(bench_url, "record_usage_one.pgbench", CYCLES, clients=2, runs=200)
    pgbench(bench_url, "checkpoint_one.pgbench", CYCLES, clients=2, runs=200)
    assert conn.execute("SELECT type::text, count(*) FROM runq.run_events GROUP BY 1 ORDER BY 1").fetchall() \
        == [("run.checkpointed", 2 * CYCLES), ("run.claimed", 200), ("run.usage", 2 * CYCLES)]
    assert conn.execute("SELECT (SELECT count(*) FROM runq.runs WHERE status = 'running'),"
                        " sum((usage ->> 'calls')::numeric), sum((usage ->> 'cost_usd')::numeric)::text"
                        " FROM runq.run_usage").fetchone() == (200, 2 * CYCLES, "1.2300")
    # Each client kept to its own share: runs 1-100 for client 0, 101-200 for client 1.
    assert conn.execute("SELECT count(*) FROM runq.run_events AS e WHERE e.type = 'run.usage'"
                        " AND e.run_id BETWEEN 1 AND 100").fetchone()[0] == CYCLES


@pytest.mark.parametrize("script, types", [
    ("cycle_class_runq.pgbench", [("run.claimed", 2 * CYCLES), ("run.succeeded", 2 * CYCLES)]),
    ("cycle_turn_runq.pgbench", [("run.claimed", 2 * CYCLES), ("run.succeeded", 2 * CYCLES),
                                 ("run.turn_started", 2 * CYCLES)]),
])
def test_cycles_of_runs_with_a_budget_and_a_timeout_complete_each_run(
        bench_url: str, conn: psycopg.Connection, script: str, types: list[tuple[str, int]]) -> None:
    # Part cost's limits are never reached: no gate and no deadline stops a run.
    # The runs of the class named (11) only: the other class's stay queued.
    load_runs(conn, 2 * CYCLES + 10, priority=11, budget='{"cost_usd": 2.00, "input_tokens": 1000000}',
              timeout="1 hour")
    load_runs(conn, 5, priority=10)
    pgbench(bench_url, script, CYCLES, clients=2, **{"class": 11})
    assert conn.execute("SELECT priority, status::text, count(*) FROM runq.runs GROUP BY 1, 2"
                        " ORDER BY 1, 2").fetchall() \
        == [(10, "queued", 5), (11, "queued", 10), (11, "succeeded", 2 * CYCLES)]
    assert conn.execute("SELECT e.type::text, count(*) FROM runq.run_events AS e"
                        " JOIN runq.runs AS r ON r.run_id = e.run_id AND r.lease_epoch = e.epoch"
                        " GROUP BY 1 ORDER BY 1").fetchall() == types
    assert conn.execute("SELECT count(*) FROM runq.runs WHERE deadline = created_at + timeout"
                        " AND budget IS NOT NULL").fetchone()[0] == 2 * CYCLES + 10


def test_sweep_over_deadlines_none_due_changes_nothing(bench_url: str, conn: psycopg.Connection) -> None:
    load_runs(conn, 100, priority=10, timeout="1 day")
    load_runs(conn, 100, priority=10)
    pgbench(bench_url, "sweep.pgbench", 5)
    assert conn.execute("SELECT status::text, count(*), count(deadline) FROM runq.runs GROUP BY 1").fetchall() \
        == [("queued", 200, 100)]
    assert conn.execute("SELECT count(*) FROM runq.run_events").fetchone()[0] == 0


@pytest.mark.once
def test_cpu_per_cycle_reports_each_queue(server_url: str) -> None:
    # bench/cpu.py is how a hot-path change is judged (backend CPU per cycle):
    # it must measure every queue, and runq at a revision, with a real count.
    out = subprocess.run([sys.executable, str(BENCH / "cpu.py"), "--rev", "HEAD",
                          "--cycles", "300", "--reps", "1"],
                         env={**os.environ, "RUNQ_DATABASE_URL": server_url},
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split("|")[1].strip(): float(line.split("|")[2])
            for line in out.stdout.splitlines() if line.startswith("| ") and "µs" not in line
            and "---" not in line}
    assert set(rows) == {"minimal queue", "floor", *(
        f"runq {at}{limits}" for at in ("(working tree)", "at HEAD")
        for limits in ("", ", limits set, never reached", ", 6 of 12 tenants at a limit of 2"))}, \
        out.stdout
    assert all(us > 0 for us in rows.values()), out.stdout
    assert rows["runq (working tree)"] > rows["minimal queue"], out.stdout


@pytest.mark.once
def test_instructions_per_cycle_reports_each_queue() -> None:
    # bench/instructions.py counts what the server executes per call with
    # callgrind: the way to judge a hot-path change on a noisy machine, as a
    # ratio to the floor's count of the same call.
    out = subprocess.run([sys.executable, str(BENCH / "instructions.py"), "--rev", "HEAD",
                          "--kinds", "--one-call", "--cycles", "50"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = re.findall(r"^\| (runq[^|]*|floor) \| ([^|]*) \| ([\d,]+) \| ([\d.]+) \|",
                      out.stdout, re.M)
    one_call = "complete_and_claim (and the table that hands the run on)"
    assert [(q, k) for q, k, _, _ in rows] == [
        ("floor", "claim + complete"),
        ("runq (working tree)", "claim + complete"), ("runq at HEAD", "claim + complete"),
        ("runq (working tree)", "claim (kinds given) + complete"),
        ("runq (working tree)", one_call), ("runq at HEAD", one_call),
        ("floor", "heartbeat"),
        ("runq (working tree)", "heartbeat"), ("runq at HEAD", "heartbeat")], out.stdout
    for queue, call, n, ratio in rows:
        # a cycle is a claim and a complete, a heartbeat one update: far more
        # than nothing; and runq does more than the floor, whose ratio is 1
        low = 50_000 if call == "heartbeat" else 100_000
        assert low < int(n.replace(",", "")) < 10_000_000, out.stdout
        assert (float(ratio) == 1.0) if queue == "floor" else (float(ratio) > 1.0), out.stdout


@pytest.mark.once
def test_long_runs_holds_its_runs(server_url: str, tmp_path: Path) -> None:
    # bench/long_runs.py in small: 20 runs for 30 s in one worker process,
    # steps every 1-3 s; every run succeeds on its first lease, and the
    # figures are read from the server. 30 s, not less: the window must hold
    # a heartbeat (every 10 s) whose function counts the server has flushed,
    # which PostgreSQL 15 may hold back for up to 10 s after a beat.
    out = subprocess.run([sys.executable, str(BENCH / "long_runs.py"), "--runs", "20",
                          "--minutes", "0.5", "--sleep", "1", "3",
                          "--out", str(tmp_path / "long_runs.md")],
                         env={**os.environ, "RUNQ_DATABASE_URL": server_url},
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "long_runs.md").read_text().strip() == out.stdout.strip()
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in out.stdout.splitlines() if line.startswith("| ")}
    assert rows["runs succeeded"] == "20 / 20", out.stdout
    assert rows["leases lost (run.fenced + run.requeued)"] == "0", out.stdout
    assert rows["claims"] == "20", out.stdout
    assert 20 * 7 <= int(rows["steps written (begin_turn + checkpoint)"]) <= 20 * 30, out.stdout
    assert 1 <= int(rows["max server connections of the worker"]) <= 6, out.stdout
    assert int(rows["heartbeat_many calls in the window"]) >= 1, out.stdout
    assert rows["run heartbeats in the window (calls x runs)"] \
        == str(20 * int(rows["heartbeat_many calls in the window"])), out.stdout
    assert 10 < float(rows["nearest lease expiry seen (s left of 30)"]) < 30, out.stdout
    assert float(rows["all worker backends' CPU in the window, s"]) > 0, out.stdout


@pytest.mark.once
def test_waiting_bench_reports_waits_and_streams(server_url: str) -> None:
    # bench/waiting.py in small: 30 waits, then 30 runs emitting 10 chunks a
    # second for 2 s. Every chunk is read, the waits hold two connections.
    out = subprocess.run([sys.executable, str(BENCH / "waiting.py"), "--runs", "30",
                          "--rate", "10", "--seconds", "2"],
                         env={**os.environ, "RUNQ_DATABASE_URL": server_url},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in out.stdout.splitlines() if line.startswith("| ")}
    assert rows["waits at once"] == "30", out.stdout
    assert rows["server connections of the process's waits"] == "2", out.stdout
    read, stored = rows["chunks read (each run's, by one reader each)"].split(" of ")
    assert read == stored and int(stored.replace(",", "")) >= 30 * 10, out.stdout
    assert re.fullmatch(r"[\d.]+ / [\d.]+ ms",
                        rows["wake-up: complete sent -> wait returned, p50 / p99"]), out.stdout


@pytest.mark.once
def test_agents_bench_counts_two_calls_per_request_and_tool(server_url: str) -> None:
    # bench/agents.py in small: the capability's server calls are as measured,
    # 2 per model request and 2 per tool call, none read on a first attempt.
    out = subprocess.run([sys.executable, str(BENCH / "agents.py"), "--runs", "8", "--reps", "2",
                          "--turns", "10"],
                         env={**os.environ, "RUNQ_DATABASE_URL": server_url},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in out.stdout.splitlines() if line.startswith("| ")}
    assert rows["calls per model request: begin_turn + record_model_call"] == "1 + 1", out.stdout
    assert rows["calls per tool call: begin_tool + end_tool"] == "1 + 1", out.stdout
    assert rows["reads per run on a first attempt: model_calls + tool_calls"] == (
        "0 (requests), 0 (tools)"), out.stdout


@pytest.mark.once
def test_children_bench_spawns_waits_and_wakes(server_url: str) -> None:
    # bench/children.py in small: every child is spawned and completed, and the
    # parent's next claim is the resumed one, each rep.
    out = subprocess.run([sys.executable, str(BENCH / "children.py"), "--children", "60",
                          "--reps", "2"],
                         env={**os.environ, "RUNQ_DATABASE_URL": server_url},
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in out.stdout.splitlines() if line.startswith("| ")}
    for measure in ("runq.spawn, per call", "runq.wait_children of the parent of 60",
                    "the same, server clock: last child's run.succeeded -> the parent's run.claimed"):
        assert re.fullmatch(r"[\d.]+ ms \([\d.]+ to [\d.]+\)", rows[measure]), out.stdout
    assert float(rows["spawn / submit"]) > 0, out.stdout
