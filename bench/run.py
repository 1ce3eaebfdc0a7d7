#!/usr/bin/env python3
"""Benchmarks runq against its two references, in one run on one server.

    bench/run.py          quick pass (reduced sizes, a few minutes)
    bench/run.py --full   the sizes of the performance table (docs/performance/)
    bench/run.py --only cycle --rev 8388c13
                          ... with runq's cycles as committed there beside the
                          working tree's, interleaved (a before/after)

Every figure is measured with pgbench (no client library in the way) and
reported as a ratio to the ceiling (a single-row UPDATE by primary key) and
to the minimal queue (two columns, FOR UPDATE SKIP LOCKED, nothing else);
cycles are also set beside the floor (the minimal queue behind SECURITY
DEFINER functions with a fencing epoch and one event per transition: what
the contract and its security rules cost before any design of runq's own);
batched worker calls are set beside one call per run instead, cycles and
claims under concurrency limits beside the same without them, and the cost
ledger's and the deadlines' figures beside the same work without them
(record_usage beside checkpoint; cycles of runs with a budget and a timeout
beside runs without; a sweep over queued runs with deadlines beside one over
runs without). Medians of
interleaved repetitions. Uses RUNQ_DATABASE_URL, or starts the throwaway
cluster with scripts/pg.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PGBIN = Path(os.environ.get("RUNQ_PG_BIN", "/usr/lib/postgresql/15/bin"))
DB = "runq_bench"
PARTS = ("cycle", "latency", "kinds", "heartbeat", "soak", "xmin", "submit", "notify", "batch",
         "limits", "cost")
# What part cost gives the runs that have them: limits a cycle never reaches.
BUDGET = '{"cost_usd": 2.00, "input_tokens": 1000000}'
TIMEOUT = "1 hour"
BATCH = 10  # runs a claim takes and a complete_many completes in the batched cycles


@dataclass(frozen=True)
class Sizes:
    seconds: int          # per throughput measurement
    reps: int             # interleaved repetitions, median reported
    latency_claims: int   # interactive claims per latency measurement
    backlog: int          # queued async runs behind them
    scheduled: int        # runs scheduled for later behind them
    heartbeats: int
    soak_cycles: int
    hold_seconds: int     # how long the held snapshot lasts
    completes: int        # runs completed per measurement of completes
    sweep_runs: int = 100_000  # queued runs behind each sweep of part cost
    pairs: int = 15  # part cost: cycles without and with limits, measured in turn
    pair_seconds: int = 2
    clients: tuple[int, ...] = (1, 4, 16)
    batch_clients: tuple[int, ...] = (1, 4)
    notify_clients: tuple[int, ...] = (4, 16, 64)


QUICK = Sizes(seconds=5, reps=3, latency_claims=5000, backlog=200_000, scheduled=20_000,
              heartbeats=100_000, soak_cycles=100_000, hold_seconds=20,
              completes=50_000)
FULL = Sizes(seconds=15, reps=3, latency_claims=20000, backlog=1_000_000, scheduled=100_000,
             heartbeats=100_000, soak_cycles=1_000_000, hold_seconds=60,
             completes=200_000)


def server_url() -> str:
    url = os.environ.get("RUNQ_DATABASE_URL")
    if url:
        return url
    return subprocess.run([str(ROOT / "scripts/pg"), "start"], check=True,
                          capture_output=True, text=True).stdout.strip()


def with_db(url: str, db: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + db))


class Bench:
    def __init__(self, url: str, sizes: Sizes, rev: str | None = None) -> None:
        self.admin = url
        self.url = self.here = with_db(url, DB)
        # rev: runq's SQL as committed there, in a database of its own on the
        # same server, measured by the same scripts in turn with the tree's.
        self.rev = rev
        self.sizes = sizes

    def psql(self, sql: str, url: str | None = None) -> str:
        return subprocess.run(
            [str(PGBIN / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", url or self.url,
             "-c", sql],
            check=True, capture_output=True, text=True).stdout.strip()

    def setup(self) -> None:
        schemas = {DB: (ROOT / "sql/runq.sql").read_text()}
        if self.rev:
            schemas[DB + "_rev"] = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{self.rev}:sql/runq.sql"],
                check=True, capture_output=True, text=True).stdout
        for db, schema in schemas.items():
            self.psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", self.admin)
            self.psql(f"CREATE DATABASE {db}", self.admin)
            subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                            with_db(self.admin, db), "-f", "-", "-f", str(HERE / "references.sql")],
                           input=schema, text=True, check=True, capture_output=True)

    @contextmanager
    def at(self, queue: str) -> Iterator[str]:
        """A queue named name@rev is measured in the rev's database."""
        name, _, rev = queue.partition("@")
        self.url = with_db(self.admin, DB + "_rev") if rev else self.here
        try:
            yield name
        finally:
            self.url = self.here

    # -- fixtures ---------------------------------------------------------

    def reset(self) -> None:
        self.psql("TRUNCATE runq.runs, runq.run_events, runq.checkpoints, runq.inputs,"
                  " runq.tool_calls, runq.idempotency_keys, bench_minq,"
                  " bench_floor, bench_floor_events"
                  " RESTART IDENTITY CASCADE")
        self.psql("SELECT runq.set_limit(scope, key, NULL) FROM runq.limits")
        self.psql("VACUUM ANALYZE runq.runs, runq.run_events, bench_minq,"
                  " bench_floor, bench_floor_events")

    def load_runq(self, n: int, priority: int, *, scheduled: bool = False,
                  kind: str = "bench.cycle", tenant: str = "'bench'",
                  budget: str | None = None, timeout: str | None = None) -> None:
        # Straight into the table, as a bulk load would: submit's own cost is
        # measured on its own below. tenant: an expression of g, 1..n. budget
        # (jsonb text) and timeout (interval text) as submit stores them: the
        # deadline is created_at + timeout, one instant read once per run.
        when = "now() + interval '1 day'" if scheduled else "NULL"
        budget_sql = f"'{budget}'::jsonb" if budget else "NULL"
        timeout_sql = f"interval '{timeout}'" if timeout else "NULL"
        self.psql(
            "INSERT INTO runq.runs"
            " (created_at, updated_at, scheduled_for, priority, tenant_id, kind, budget,"
            " timeout, deadline)"
            f" SELECT t, now(), {when}, {priority}, {tenant}, '{kind}', {budget_sql},"
            f" {timeout_sql}, t + {timeout_sql}"
            f" FROM (SELECT g, clock_timestamp() AS t FROM generate_series(1, {n}) AS g"
            " OFFSET 0) AS s")

    def load_minq(self, n: int, table: str = "bench_minq") -> None:
        self.psql(f"INSERT INTO {table} (state) SELECT 0 FROM generate_series(1, {n})")

    # -- pgbench ----------------------------------------------------------

    def pgbench(self, script: str, clients: int, *, seconds: int | None = None,
                transactions: int | None = None, log_dir: str | None = None,
                defines: dict[str, str] | None = None,
                settings: dict[str, str] | None = None) -> tuple[float, list[float]]:
        """Runs one pgbench, its sessions with settings; returns (tps,
        per-transaction latencies in ms if logged)."""
        args = [str(PGBIN / "pgbench"), "-n", "-M", "prepared", "-c", str(clients),
                "-j", str(min(clients, 4)), "-f", str(HERE / script)]
        args += ["-T", str(seconds)] if seconds else ["-t", str(transactions)]
        for k, v in (defines or {}).items():
            args += ["-D", f"{k}={v}"]
        if log_dir:
            args += ["-l", "--log-prefix", os.path.join(log_dir, "tx")]
        env = {**os.environ, "PGOPTIONS": " ".join(f"-c {k}={v}" for k, v in settings.items())
               } if settings else None
        out = subprocess.run([*args, self.url], capture_output=True, text=True, check=False,
                             env=env)
        if out.returncode != 0 or "aborted" in out.stdout:
            sys.exit(f"pgbench {script} failed:\n{out.stdout}\n{out.stderr}")
        tps = float(re.search(r"tps = ([\d.]+)", out.stdout).group(1))  # type: ignore[union-attr]
        if not log_dir:
            return tps, []
        timed: list[tuple[int, float]] = []  # (when it started in us, latency in ms)
        for f in sorted(Path(log_dir).glob("tx*")):
            for line in f.read_text().splitlines():
                fields = line.split()
                # client_id transaction_no time script_no time_epoch time_us
                timed.append((int(fields[4]) * 1_000_000 + int(fields[5]), int(fields[2]) / 1000))
            f.unlink()
        timed.sort()
        return tps, [lat for _, lat in timed]

    def hot_counters(self) -> tuple[int, int]:
        row = self.psql("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                        " WHERE relid = 'runq.runs'::regclass")
        upd, hot = row.split("|")
        return int(upd), int(hot)

    # -- measurements -----------------------------------------------------

    def cycle_rate(self, queue: str, clients: int, sync: str = "off") -> float:
        """Cycles per second (transactions for the ceiling). runq_one: one
        call of complete_and_claim a cycle, its rate counted in calls (a
        client's first call only claims). runq_batch and minq_batch: runs per
        second, claimed BATCH at a time and completed together (two
        transactions for BATCH runs). queue@rev: the same in the rev's
        database."""
        with self.at(queue) as name:
            return self._cycle_rate(name, clients, sync)

    def _cycle_rate(self, queue: str, clients: int, sync: str) -> float:
        s = self.sizes
        self.reset()
        supply = 40_000 * s.seconds  # more runs than any queue and client count can use
        batch = {"batch": str(BATCH)}
        # queue: (what to load, how many, script, its defines, runs a transaction)
        plans: dict[str, tuple[str | None, int, str, dict[str, str], int]] = {
            "ceiling": (None, 0, "ceiling.pgbench", {}, 1),
            "minq": ("bench_minq", supply, "cycle_minq.pgbench", {}, 1),
            # rows are cheap to load, and batches take them fast
            "minq_batch": ("bench_minq", supply * BATCH, "cycle_batch_minq.pgbench", batch, BATCH),
            "floor": ("bench_floor", supply, "cycle_floor.pgbench", {}, 1),
            "runq": ("runq", supply, "cycle_runq.pgbench", {}, 1),
            "runq_one": ("runq", supply, "cycle_one_runq.pgbench", {"started": "0"}, 1),
            "runq_batch": ("runq", supply * 2, "cycle_batch_runq.pgbench", batch, BATCH),
        }
        table, rows, script, defines, per = plans[queue]
        if table == "runq":
            self.load_runq(rows, 10)
        elif table:
            self.load_minq(rows, table)
        # The load's dirty pages written now, not while measured: a checkpoint
        # that starts in a measurement makes every page's first change after
        # it log a full page image, which costs the queue that touches more
        # pages (runq's indexes) the most.
        self.psql("CHECKPOINT")
        tps, _ = self.pgbench(script, clients, seconds=s.seconds, defines=defines,
                              settings={"synchronous_commit": sync})
        if per > 1:
            self.check_left("SELECT count(*) FROM runq.runs WHERE status = 'queued'"
                            if table == "runq" else
                            "SELECT count(*) FROM bench_minq WHERE state = 0", queue)
        return tps * per

    def check_left(self, count_sql: str, queue: str) -> None:
        """A batched cycle that ran out of rows would go on claiming none,
        each an empty cycle counted as BATCH runs: some must be left."""
        if int(self.psql(count_sql)) == 0:
            sys.exit(f"{queue}: every row was taken; load more for this rate")

    def claim_latency(self, backlog: bool) -> tuple[float, float]:
        s = self.sizes
        self.reset()
        if backlog:
            self.load_runq(s.backlog, 10)
            self.load_runq(s.scheduled, 10, scheduled=True)
            self.load_runq(s.scheduled, 0, scheduled=True)
        self.load_runq(s.latency_claims, 0)
        self.psql("VACUUM ANALYZE runq.runs")
        with tempfile.TemporaryDirectory() as d:
            _, lat = self.pgbench("claim_interactive.pgbench", 1,
                                  transactions=s.latency_claims, log_dir=d)
        return percentile(lat, 50), percentile(lat, 99)

    def claim_kind_latency(self, backlog: bool) -> tuple[float, float]:
        """A claim naming its kind, behind a backlog of another kind queued
        earlier in the same class (or none)."""
        s = self.sizes
        self.reset()
        if backlog:
            self.load_runq(s.backlog, 0, kind="bench.other")
        self.load_runq(s.latency_claims, 0, kind="bench.mine")
        self.psql("VACUUM ANALYZE runq.runs")
        # The load's dirty pages written now, not by a checkpoint during the claims.
        self.psql("CHECKPOINT")
        with tempfile.TemporaryDirectory() as d:
            _, lat = self.pgbench("claim_kind.pgbench", 1,
                                  transactions=s.latency_claims, log_dir=d)
        return percentile(lat, 50), percentile(lat, 99)

    def heartbeat(self) -> tuple[float, float, float]:
        s = self.sizes
        self.reset()
        runs = 1000
        self.load_runq(runs, 10)
        self.psql(f"SELECT count(*) FROM runq.claim(ARRAY[10], 'bench', interval '1 hour', {runs})")
        self.psql("SELECT pg_stat_force_next_flush()")
        time.sleep(1.0)
        upd0, hot0 = self.hot_counters()
        tps, _ = self.pgbench("heartbeat.pgbench", 4, transactions=s.heartbeats // 4,
                              defines={"runs": str(runs)})
        time.sleep(1.5)  # let the backends' stats reach the shared counters
        upd1, hot1 = self.hot_counters()
        hot_share = (hot1 - hot0) / max(1, upd1 - upd0)
        return tps, 1000 * 4 / tps, hot_share

    def soak(self) -> tuple[float, float, float]:
        s = self.sizes
        self.reset()
        self.load_runq(s.soak_cycles, 10)
        self.psql("VACUUM ANALYZE runq.runs")
        with tempfile.TemporaryDirectory() as d:
            tps, lat_in_order = self.pgbench("cycle_runq.pgbench", 4,
                                             transactions=s.soak_cycles // 4, log_dir=d)
        tenth = len(lat_in_order) // 10
        first = statistics.median(lat_in_order[:tenth])
        last = statistics.median(lat_in_order[-tenth:])
        return tps, first, last

    @contextmanager
    def held_snapshot(self, held: bool = True) -> Iterator[None]:
        """Another session holds a snapshot (and an xid) from a second before
        the block to its end, as a long report or a forgotten transaction does."""
        if not held:
            yield
            return
        holder = subprocess.Popen([str(PGBIN / "psql"), "-X", "-q", self.url],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        assert holder.stdin
        holder.stdin.write("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT txid_current();\n")
        holder.stdin.flush()
        time.sleep(1.0)
        try:
            yield
        finally:
            holder.communicate("COMMIT;\n")

    def held_xmin(self, queue: str) -> tuple[float, float, float, float]:
        """(tps before, p99 before, tps during, p99 during) at 16 clients."""
        s = self.sizes
        self.reset()
        script = "cycle_runq.pgbench" if queue == "runq" else "cycle_minq.pgbench"
        supply = 40_000 * (s.seconds + s.hold_seconds)
        if queue == "runq":
            self.load_runq(supply, 10)
        else:
            self.load_minq(supply)
        self.psql("VACUUM ANALYZE runq.runs, bench_minq")
        with tempfile.TemporaryDirectory() as d:
            tps0, lat0 = self.pgbench(script, 16, seconds=s.seconds, log_dir=d)
        with self.held_snapshot(), tempfile.TemporaryDirectory() as d:
            tps1, lat1 = self.pgbench(script, 16, seconds=s.hold_seconds, log_dir=d)
        return tps0, percentile(lat0, 99), tps1, percentile(lat1, 99)

    def set_limits(self, sql: str) -> None:
        """Sets limits after a load, to the end submits under them would have
        reached: set_limit parks the newest admitted runs over a limit, the
        running ones keeping their slots. Loading under them would take time
        quadratic in the load: each insert counts its keys' admitted runs,
        with a plan made when the table was empty (a seq scan)."""
        self.psql(sql)

    def limits_cycle_rate(self, case: str, limited: bool, clients: int, held: bool) -> float:
        """Cycles with concurrency limits set (limited) or none. "unreached":
        every tenant and kind under a default of 1,000,000, the supply dealt
        round 100 tenants. "saturated": the supply dealt round 12 tenants,
        the first 6 limited to 2 running runs, so with more clients than
        their 12 slots they sit at their limit, their deep backlogs parked and
        admitted one by one as their runs complete. held: under a snapshot
        held throughout, for hold_seconds instead of seconds."""
        s = self.sizes
        self.reset()
        seconds = s.hold_seconds if held else s.seconds
        unreached = case == "unreached"
        # A supply for s.seconds, also for hold_seconds under a held snapshot:
        # that slows the cycles several-fold, and the load is a quarter.
        self.load_runq(40_000 * s.seconds, 10, tenant=f"'t' || g % {100 if unreached else 12}")
        if limited and unreached:
            self.set_limits("SELECT runq.set_limit('tenant', NULL, 1000000),"
                            " runq.set_limit('kind', NULL, 1000000)")
        elif limited:  # parks all but the 2 oldest runs of each limited tenant
            self.set_limits("SELECT runq.set_limit('tenant', 't' || g, 2)"
                            " FROM generate_series(0, 5) AS g")
        self.psql("VACUUM ANALYZE runq.runs")
        self.psql("CHECKPOINT")
        with self.held_snapshot(held):
            tps, _ = self.pgbench("cycle_runq.pgbench", clients, seconds=seconds)
        if not unreached:  # the limited tenants' runs went on being claimed and completed
            done = self.psql("SELECT count(*) FROM runq.runs WHERE status = 'succeeded'"
                             " AND tenant_id IN ('t0', 't1', 't2', 't3', 't4', 't5')")
            if int(done) < tps * seconds / 100:
                sys.exit(f"limits {case}: only {done} runs of the limited tenants completed")
        return tps

    def limit_claim_latency(self, backlog: bool, held: bool = False) -> tuple[float, float]:
        """Tenant b's interactive claims behind tenant a at its limit of 2
        (running, claimed for an hour) with s.backlog queued runs older than
        b's in the same class, parked as if submitted while a was at its
        limit; or on the empty queue, without limits. held: under a snapshot held throughout."""
        s = self.sizes
        self.reset()
        if backlog:
            self.load_runq(2, 0, tenant="'a'")
            self.psql("SELECT count(*) FROM runq.claim(ARRAY[0], 'bench', interval '1 hour', 2)")
            self.load_runq(s.backlog, 0, tenant="'a'")
        self.load_runq(s.latency_claims, 0, tenant="'b'")
        if backlog:  # parks every queued run of a: its 2 running runs keep their slots
            self.set_limits("SELECT runq.set_limit('tenant', 'a', 2)")
        self.psql("VACUUM ANALYZE runq.runs")
        self.psql("CHECKPOINT")
        with self.held_snapshot(held), tempfile.TemporaryDirectory() as d:
            _, lat = self.pgbench("claim_interactive.pgbench", 1,
                                  transactions=s.latency_claims, log_dir=d)
        running = self.psql("SELECT string_agg(tenant_id || ' ' || n, ', ' ORDER BY tenant_id)"
                            " FROM (SELECT tenant_id, count(*) AS n FROM runq.runs"
                            " WHERE status = 'running' GROUP BY 1) AS c")
        want = f"a 2, b {s.latency_claims}" if backlog else f"b {s.latency_claims}"
        if running != want:
            sys.exit(f"limits: running {running}, not {want}")
        return percentile(lat, 50), percentile(lat, 99)

    def submit(self) -> tuple[float, float]:
        s = self.sizes
        self.reset()
        one, _ = self.pgbench("submit_one.pgbench", 4, seconds=s.seconds)
        self.reset()
        batch, _ = self.pgbench("submit_batch.pgbench", 4, seconds=s.seconds)
        return one, batch * 100

    def submit_rate(self, case: str, clients: int, sync: str) -> float:
        """Submits per second, one per transaction. case idle: runs ready
        now while a worker is idle (a claim came back short just before:
        runq.idle_mark), so each submit notifies runq; busy: runs ready now
        with no worker idle, which do not notify; later: runs scheduled a day
        ahead, which never notify. PostgreSQL takes one lock for the commit
        of every notifying transaction, so idle against later is what NOTIFY
        costs. Checked after: every run created, and ready or not as asked."""
        s = self.sizes
        self.reset()
        self.psql("SELECT setval('runq.idle_mark', 1)")
        if case == "idle":
            self.psql("SELECT count(*) FROM runq.claim(ARRAY[32767])")  # short: idle for a minute
        script = "submit_later.pgbench" if case == "later" else "submit_one.pgbench"
        tps, _ = self.pgbench(script, clients, seconds=s.seconds,
                              settings={"synchronous_commit": sync})
        row = self.psql("SELECT count(*), count(*) FILTER (WHERE scheduled_for IS NULL)"
                        " FROM runq.runs")
        made, ready = (int(x) for x in row.split("|"))
        if made < tps * s.seconds / 2 or ready != (0 if case == "later" else made):
            sys.exit(f"{script}: {made} runs made, {ready} ready now")
        return tps

    def batched(self, call: str, batch: int, clients: int, sync: str) -> float:
        """Runs per second of runq.<call> for `batch` runs per transaction:
        one call of runq.<call>_many, or (batch 1) one call of runq.<call>.

        Both ways do the same thing to each run and nothing more, so the
        ratio is the batching alone. Every run was claimed once (epoch 1), in
        run_id order. A heartbeat picks from the client's own share of the
        runs, as a worker beats only its own runs (so no client waits on
        another's row lock): one random run, or a random block of `batch`
        consecutive ones (its in-flight set). A complete must find its run
        still running, since one that finds it done returns false and costs
        less, and re-arming it in the same transaction would be work of its
        own: so completes are timed over a fixed pool of claimed runs, the
        same for both ways, used up exactly. The scripts count their calls
        in a pgbench variable and deal the runs (or blocks of `batch`) round
        the clients, so no two calls name the same run. After each
        measurement every call is checked to have done its job (the runs
        still running, or all succeeded, and no other events). The batched
        scripts build their arrays in SQL (generate_series), a few
        microseconds a call that a client's array parameter would not cost:
        against the batch, if anything."""
        s = self.sizes
        self.reset()
        runs = 10_000 if call == "heartbeat" else s.completes
        self.load_runq(runs, 10)
        self.psql(f"SELECT count(*) FROM runq.claim(ARRAY[10], 'bench', interval '1 hour', {runs})")
        self.psql("VACUUM ANALYZE runq.runs, runq.run_events")
        self.psql("CHECKPOINT")  # the setup's dirty pages written now, not while measured
        script = f"{call}_{'many' if batch > 1 else 'one'}.pgbench"
        defines = {"runs": str(runs), "clients": str(clients), "batch": str(batch),
                   "calls": "0"}
        settings = {"synchronous_commit": sync}
        if call == "heartbeat":
            tps, _ = self.pgbench(script, clients, seconds=s.seconds, defines=defines,
                                  settings=settings)
        else:
            tps, _ = self.pgbench(script, clients, transactions=runs // (clients * batch),
                                  defines=defines, settings=settings)
        done = "running" if call == "heartbeat" else "succeeded"
        got = self.psql(f"SELECT count(*) FILTER (WHERE status = '{done}') FROM runq.runs")
        others = self.psql("SELECT count(*) FROM runq.run_events"
                           " WHERE type NOT IN ('run.claimed', 'run.succeeded')")
        if (int(got), int(others)) != (runs, 0):
            sys.exit(f"{script}: {got} of {runs} runs {done}, {others} other events")
        return tps * batch


    # -- the cost ledger and deadlines ---------------------------------------

    def paired_ledger_rates(self, clients: int, sync: str,
                            pairs: int) -> tuple[list[float], list[float]]:
        """Calls per second of runq.checkpoint and of runq.record_usage, one
        per transaction, each on a random run of the client's own share of
        10,000 running runs (claimed once, epoch 1), as a worker writes only
        to its own runs; measured in turn, pairs times each, on one load of
        the runs (as paired_cycle_rates, for the same reason). Both scripts
        send the same document. Checked after: every call applied (no
        run.fenced, nothing but the calls' events), and the usage totals
        count exactly the run.usage events logged. Returns (checkpoint,
        record_usage), pair by pair."""
        s = self.sizes
        self.reset()
        runs = 10_000
        self.load_runq(runs, 10)
        self.psql(f"SELECT count(*) FROM runq.claim(ARRAY[10], 'bench', interval '1 hour', {runs})")
        self.psql("VACUUM ANALYZE runq.runs, runq.run_events, runq.checkpoints")
        self.psql("CHECKPOINT")  # the setup's dirty pages written now, not while measured
        rates: dict[str, list[float]] = {"checkpoint": [], "record_usage": []}
        for pair in range(pairs):
            for call in (("checkpoint", "record_usage") if pair % 2 == 0
                         else ("record_usage", "checkpoint")):
                tps, _ = self.pgbench(f"{call}_one.pgbench", clients, seconds=s.pair_seconds,
                                      defines={"runs": str(runs), "clients": str(clients)},
                                      settings={"synchronous_commit": sync})
                rates[call].append(tps)
        row = self.psql(
            "SELECT (SELECT count(*) FROM runq.runs WHERE status = 'running'),"
            " (SELECT count(*) FROM runq.run_events WHERE type = 'run.checkpointed'),"
            " (SELECT count(*) FROM runq.run_events WHERE type = 'run.usage'),"
            " (SELECT count(*) FROM runq.run_events WHERE type NOT IN"
            "  ('run.claimed', 'run.checkpointed', 'run.usage')),"
            " (SELECT coalesce(sum((usage ->> 'calls')::bigint), 0) FROM runq.run_usage)")
        running, checkpoints, usages, others, counted = (int(x) for x in row.split("|"))
        if running != runs or others or counted != usages \
                or min(checkpoints, usages) < min(map(sum, rates.values())) * s.pair_seconds / 2:
            sys.exit(f"ledger writes: {running} of {runs} runs running,"
                     f" {checkpoints} run.checkpointed, {usages} run.usage, {others} other"
                     f" events, usage counts {counted} calls")
        return rates["checkpoint"], rates["record_usage"]

    def paired_cycle_rates(self, clients: int, sync: str, script: str,
                           pairs: int) -> tuple[list[float], list[float]]:
        """Cycles per second of runs without a budget or a timeout (class 10)
        and of runs each submitted with both (class 11; never reached, so
        every run succeeds), measured in turn, pairs times each, in one
        database loaded once with both: the pairs are seconds apart on the
        same table, indexes and WAL, where loading each measurement's own
        runs spread them over minutes, and the disk's flush times moved the
        rates by ±20 % in between. Which goes first alternates. Returns
        (without, with), pair by pair."""
        s = self.sizes
        self.reset()
        supply = 6_000 * s.pair_seconds * pairs  # more than a class's cycles can use
        self.load_runq(supply, 10)
        self.load_runq(supply, 11, budget=BUDGET, timeout=TIMEOUT)
        self.psql("VACUUM ANALYZE runq.runs")
        self.psql("CHECKPOINT")
        rates: dict[int, list[float]] = {10: [], 11: []}
        for pair in range(pairs):
            for cls in ((10, 11) if pair % 2 == 0 else (11, 10)):
                tps, _ = self.pgbench(script, clients, seconds=s.pair_seconds,
                                      defines={"class": str(cls)},
                                      settings={"synchronous_commit": sync})
                rates[cls].append(tps)
        row = self.psql("SELECT count(*) FILTER (WHERE status = 'succeeded'),"
                        " count(*) FILTER (WHERE status NOT IN ('succeeded', 'queued')),"
                        " count(*) FILTER (WHERE status = 'queued' AND priority = 10),"
                        " count(*) FILTER (WHERE status = 'queued' AND priority = 11)"
                        " FROM runq.runs")
        done, others, left10, left11 = (int(x) for x in row.split("|"))
        if others or not left10 or not left11 \
                or done < sum(map(sum, rates.values())) * s.pair_seconds / 2:
            sys.exit(f"{script}: {done} runs succeeded, {others} neither succeeded nor queued,"
                     f" {left10} / {left11} left queued")
        return rates[10], rates[11]

    def sweep_rate(self, deadlines: bool) -> float:
        """Sweeps per second (1 client) over s.sweep_runs queued runs, each
        with a deadline a day away (none due) or none, and nothing else: each
        sweep finds nothing to do. Checked after: no run moved, no event."""
        s = self.sizes
        self.reset()
        self.load_runq(s.sweep_runs, 10, timeout="1 day" if deadlines else None)
        self.psql("VACUUM ANALYZE runq.runs")
        self.psql("CHECKPOINT")
        tps, _ = self.pgbench("sweep.pgbench", 1, seconds=s.seconds)
        row = self.psql("SELECT (SELECT count(*) FROM runq.runs WHERE status = 'queued'),"
                        " (SELECT count(*) FROM runq.runs WHERE deadline IS NOT NULL),"
                        " (SELECT count(*) FROM runq.run_events)")
        queued, with_deadline, events = (int(x) for x in row.split("|"))
        if (queued, with_deadline, events) != (s.sweep_runs, s.sweep_runs * deadlines, 0):
            sys.exit(f"sweep.pgbench: {queued} of {s.sweep_runs} runs queued, {with_deadline}"
                     f" with a deadline, {events} events")
        return tps


@contextmanager
def scratch_database(prefix: str, *settings: str) -> Iterator[tuple[str, str]]:
    """A database of its own (prefix_<pid>) with runq deployed, and settings
    ("name = value") of its own, dropped at the end: its URL and the server's
    version."""
    import psycopg  # only the drivers that use a client library need it

    admin = server_url()
    db = f"{prefix}_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
        for setting in settings:
            conn.execute(f"ALTER DATABASE {db} SET {setting}")
        row = conn.execute("SHOW server_version").fetchone()
    try:
        url = with_db(admin, db)
        subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", url,
                        "-f", str(ROOT / "sql/runq.sql")], check=True, capture_output=True)
        yield url, row[0] if row else "?"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the performance table's sizes (slow)")
    ap.add_argument("--out", type=Path, help="also write the report here")
    ap.add_argument("--only", help="comma-separated subset of: " + ",".join(PARTS))
    ap.add_argument("--backlog", type=int, help="queued runs behind the latency claims")
    ap.add_argument("--hold-seconds", type=int, help="how long a held snapshot lasts")
    ap.add_argument("--seconds", type=int, help="per throughput measurement")
    ap.add_argument("--reps", type=int, help="interleaved repetitions")
    ap.add_argument("--sweep-runs", type=int, help="queued runs behind each sweep (part cost)")
    ap.add_argument("--pairs", type=int, help="pairs of cycle measurements (part cost)")
    ap.add_argument("--rev", help="part cycle: also runq's SQL as committed at this revision")
    opts = ap.parse_args()
    sizes = FULL if opts.full else QUICK
    overrides = (("backlog", opts.backlog), ("hold_seconds", opts.hold_seconds),
                 ("seconds", opts.seconds), ("reps", opts.reps), ("sweep_runs", opts.sweep_runs),
                 ("pairs", opts.pairs))
    sizes = dataclasses.replace(sizes, **{k: v for k, v in overrides if v is not None})
    only = set(opts.only.split(",")) if opts.only else set(PARTS)

    bench = Bench(server_url(), sizes, opts.rev)
    bench.setup()
    lines = [f"# runq benchmarks ({'full' if opts.full else 'quick'})", "",
             f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
             + bench.psql("SELECT version()").split(",")[0]
             + f", `bench/run.py{' --full' if opts.full else ''}"
             + (f" --only {opts.only}" if opts.only else "")
             + (f" --backlog {opts.backlog}" if opts.backlog else "")
             + (f" --hold-seconds {opts.hold_seconds}" if opts.hold_seconds else "")
             + (f" --seconds {opts.seconds}" if opts.seconds else "")
             + (f" --reps {opts.reps}" if opts.reps else "")
             + (f" --sweep-runs {opts.sweep_runs}" if opts.sweep_runs else "")
             + (f" --rev {opts.rev}" if opts.rev else "") + "`", ""]

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    if "cycle" in only:
        queues: tuple[str, ...] = ("ceiling", "minq", "floor", "runq", "runq_one", "minq_batch",
                                   "runq_batch")
        if opts.rev:
            queues += ("runq@rev", "runq_one@rev")
        rates: dict[tuple[str, int, str], list[float]] = {}
        for _ in range(sizes.reps):  # interleaved: each rep measures everything once
            for sync in ("on", "off"):
                for clients in sizes.clients:
                    for queue in queues:
                        rates.setdefault((queue, clients, sync), []).append(
                            bench.cycle_rate(queue, clients, sync))
        say(f"## Claim + complete cycles per second"
            f" (median of {sizes.reps}, {sizes.seconds} s each; server fsync="
            f"{bench.psql('SHOW fsync')})")
        say("")
        say("runq: claim, then complete, two transactions; runq one call: complete_and_claim,"
            " one call and one transaction a cycle.")
        say("")
        say("| synchronous_commit | clients | ceiling (tx/s) | minimal queue | floor | runq"
            " | runq one call | runq / minimal | one call / minimal | floor / minimal"
            " | runq / floor |")
        say("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for sync in ("on", "off"):
            for clients in sizes.clients:
                c, m, f, r, o = (statistics.median(rates[(q, clients, sync)]) for q in queues[:5])
                say(f"| {sync} | {clients} | {c:,.0f} | {m:,.0f} | {f:,.0f} | {r:,.0f} | {o:,.0f}"
                    f" | **{r / m:.2f}** | **{o / m:.2f}** | {f / m:.2f} | {r / f:.2f} |")
        say("")
        say(f"### In batches of {BATCH} (runs per second)")
        say("")
        say(f"A claim of {BATCH} runs, then one call completing them (runq: claim with max_runs,"
            " then complete_many; the minimal queue: one UPDATE of each).")
        say("")
        say("| synchronous_commit | clients | minimal queue, one a cycle | minimal queue batched"
            " | runq batched | runq batched / minimal one a cycle"
            " | runq batched / minimal batched |")
        say("|---|---:|---:|---:|---:|---:|---:|")
        for sync in ("on", "off"):
            for clients in sizes.clients:
                m, mb, rb = (statistics.median(rates[(q, clients, sync)])
                             for q in ("minq", "minq_batch", "runq_batch"))
                say(f"| {sync} | {clients} | {m:,.0f} | {mb:,.0f} | {rb:,.0f}"
                    f" | **{rb / m:.2f}** | **{rb / mb:.2f}** |")
        say("")
        if opts.rev:
            say(f"### Before and after: runq at {opts.rev} and in the working tree")
            say("")
            say("Both measured in turn in each repetition, each in a database of its own on the"
                " same server; ratios to the same minimal queue.")
            say("")
            say("| synchronous_commit | clients | runq / minimal, before | after"
                " | one call / minimal, before | after | after / before (runq, one call) |")
            say("|---|---:|---:|---:|---:|---:|---:|")
            for sync in ("on", "off"):
                for clients in sizes.clients:
                    m, r, o, rr, ro = (statistics.median(rates[(q, clients, sync)])
                                       for q in ("minq", "runq", "runq_one", "runq@rev",
                                                 "runq_one@rev"))
                    say(f"| {sync} | {clients} | {rr / m:.2f} | **{r / m:.2f}** | {ro / m:.2f}"
                        f" | **{o / m:.2f}** | {r / rr:.2f}, {o / ro:.2f} |")
            say("")

    def latency(title: str, measure: Callable[[bool], tuple[float, float]],
                labels: tuple[str, str]) -> None:
        """p50 and p99 without and with a backlog: medians of interleaved
        repetitions (a p99 is easily moved by one hiccup)."""
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(sizes.reps):
            for backlog in (False, True):
                runs[backlog].append(measure(backlog))
        empty, full = ((statistics.median(p50 for p50, _ in runs[b]),
                        statistics.median(p99 for _, p99 in runs[b])) for b in (False, True))
        say(f"## {title} ({sizes.latency_claims:,} claims, 1 client, median of {sizes.reps})")
        say("")
        say("| queue | p50 (ms) | p99 (ms) |")
        say("|---|---:|---:|")
        say(f"| {labels[0]} | {empty[0]:.3f} | {empty[1]:.3f} |")
        say(f"| {labels[1]} | {full[0]:.3f} | {full[1]:.3f} |")
        say(f"| ratio | {full[0] / empty[0]:.2f} | **{full[1] / empty[1]:.2f}** |")
        say("")

    if "latency" in only:
        latency("Interactive claim latency", bench.claim_latency,
                ("empty", f"{sizes.backlog:,} async queued + {2 * sizes.scheduled:,} scheduled"))

    if "kinds" in only:
        latency("Claim of one kind, with kinds", bench.claim_kind_latency,
                ("only that kind queued",
                 f"behind {sizes.backlog:,} older runs of another kind, same class"))

    if "heartbeat" in only:
        tps, ms, hot = bench.heartbeat()
        say(f"## Heartbeat ({sizes.heartbeats:,} calls, 4 clients)")
        say("")
        say(f"{tps:,.0f} heartbeats/s, {ms:.3f} ms per call, **{hot:.1%} HOT updates**")
        say("")

    if "soak" in only:
        tps, first, last = bench.soak()
        say(f"## Soak ({sizes.soak_cycles:,} claim/complete cycles, 4 clients,"
            " autovacuum at defaults)")
        say("")
        say(f"{tps:,.0f} cycles/s; cycle p50 first 10 % {first:.3f} ms, last 10 % {last:.3f} ms,"
            f" **drift {last / first:.2f}**")
        say("")

    if "xmin" in only:
        say(f"## Held xmin (16 clients, a snapshot held {sizes.hold_seconds} s)")
        say("")
        say("| queue | tx/s before | tx/s during | kept | p99 before (ms) | p99 during (ms) |")
        say("|---|---:|---:|---:|---:|---:|")
        for queue in ("minq", "runq"):
            t0, p0, t1, p1 = bench.held_xmin(queue)
            say(f"| {'minimal queue' if queue == 'minq' else 'runq'} | {t0:,.0f} | {t1:,.0f} |"
                f" **{t1 / t0:.2f}** | {p0:.2f} | {p1:.2f} |")
        say("")

    if "submit" in only:
        one, batch = bench.submit()
        say("## Submit (4 clients)")
        say("")
        say(f"{one:,.0f} runs/s one per transaction; {batch:,.0f} runs/s in transactions of 100")
        say("")

    if "notify" in only:
        notify_cases = ("idle", "busy", "later")
        notify_rates: dict[tuple[int, str, str], list[float]] = {}
        for rep in range(sizes.reps):
            for sync in ("on", "off"):
                for clients in sizes.notify_clients:
                    for case in (notify_cases if rep % 2 == 0 else notify_cases[::-1]):
                        notify_rates.setdefault((clients, sync, case), []).append(
                            bench.submit_rate(case, clients, sync))
        say(f"## Submit and NOTIFY (submits/s, one per transaction, median of {sizes.reps},"
            f" {sizes.seconds} s each; server fsync={bench.psql('SHOW fsync')})")
        say("")
        say("A run ready now notifies runq while a worker is idle (a claim came back short in"
            " the last minute), and not otherwise; one scheduled a day ahead never does.")
        say("")
        say("| synchronous_commit | clients | ready, a worker idle (NOTIFY) | ready, none idle"
            " | scheduled | idle / scheduled | none idle / scheduled |")
        say("|---|---:|---:|---:|---:|---:|---:|")
        for sync in ("on", "off"):
            for clients in sizes.notify_clients:
                idle, busy, later = (statistics.median(notify_rates[(clients, sync, c)])
                                     for c in notify_cases)
                say(f"| {sync} | {clients} | {idle:,.0f} | {busy:,.0f} | {later:,.0f}"
                    f" | {idle / later:.2f} | **{busy / later:.2f}** |")
        say("")

    if "batch" in only:
        ways = [(call, batch, clients, sync, b)
                for call, batch in (("heartbeat", 100), ("complete", 10))
                for clients in sizes.batch_clients for sync in ("on", "off")
                for b in (1, batch)]
        batch_rates: dict[tuple[str, int, int, str, int], list[float]] = {}
        for _ in range(sizes.reps):
            for call, batch, clients, sync, b in ways:
                batch_rates.setdefault((call, batch, clients, sync, b), []).append(
                    bench.batched(call, b, clients, sync))
        fsync = bench.psql("SHOW fsync")
        say(f"## Batched worker calls (runs/s, median of {sizes.reps}; heartbeats"
            f" {sizes.seconds} s each, completes {sizes.completes:,} runs each;"
            f" server fsync={fsync})")
        say("")
        if fsync == "off":
            say("fsync is off on this server: a commit's WAL flush waits for no disk, so"
                " synchronous_commit on costs a single call far less here than on a durable"
                " server (RUNQ_DATABASE_URL).")
            say("")
        say("| call | clients | synchronous_commit | one per transaction | batched"
            " | batched / one |")
        say("|---|---:|---|---:|---:|---:|")
        for call, batch, clients, sync, b in ways:
            if b == 1:
                continue
            one, many = (statistics.median(batch_rates[(call, batch, clients, sync, n)])
                         for n in (1, batch))
            say(f"| {call}, {batch} a call | {clients} | {sync}"
                f" | {one:,.0f} ({clients * 1e6 / one:.0f} µs a run)"
                f" | {many:,.0f} ({clients * 1e6 / many:.0f} µs a run) | **{many / one:.2f}** |")
        say("")
        say("µs a run: a client's time per run (with one client, a call's latency, divided by"
            " the runs in it when batched).")
        say("")

    if "limits" in only:
        # Under a held snapshot at 16 clients only, as part xmin.
        cases = [(case, clients, held) for case, counts in (("unreached", sizes.clients),
                                                            ("saturated", (4, 16)))
                 for held in (False, True) for clients in ((16,) if held else counts)]
        limit_rates: dict[tuple[str, int, bool, bool], list[float]] = {}
        for rep in range(sizes.reps):
            for case, clients, held in cases:
                # Which goes first alternates: the second of a pair ran later
                # into the WAL the first left (new segments, checkpoints).
                for limited in ((False, True) if rep % 2 == 0 else (True, False)):
                    limit_rates.setdefault((case, clients, held, limited), []).append(
                        bench.limits_cycle_rate(case, limited, clients, held))
        say(f"## Claim + complete cycles under concurrency limits (median of {sizes.reps},"
            f" {sizes.seconds} s each, {sizes.hold_seconds} s under a held snapshot)")
        say("")
        say("| tenants | clients | snapshot | no limits (tx/s) | limits | limits / none |")
        say("|---|---:|---|---:|---:|---:|")
        for case, clients, held in cases:
            none, limits = (statistics.median(limit_rates[(case, clients, held, limited)])
                            for limited in (False, True))
            tenants = ("100, a default of 1,000,000 (never reached)" if case == "unreached"
                       else "12, 6 of them at a limit of 2, deep backlogs")
            say(f"| {tenants} | {clients} | {'held' if held else '-'} | {none:,.0f} | {limits:,.0f}"
                f" | **{limits / none:.2f}** |")
        say("")
        labels = ("empty, no limits",
                  f"behind tenant a at its limit of 2, {sizes.backlog:,} queued older, same class")
        latency("Interactive claim of tenant b", bench.limit_claim_latency, labels)
        latency("Interactive claim of tenant b, under a snapshot held through the claims",
                lambda backlog: bench.limit_claim_latency(backlog, held=True), labels)

    if "cost" in only:
        cost(bench, sizes, say)

    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text("\n".join(lines) + "\n")


def cost(bench: Bench, sizes: Sizes, say: Callable[[str], None]) -> None:
    """Part cost: what the cost ledger and deadlines cost, each beside the
    same work without them, measured interleaved in this one run; in each
    repetition (or pair, for cycles) the two alternate which goes first (the
    second of a pair runs into the WAL the first left)."""
    syncs = ("on", "off")
    writes = [(clients, sync) for clients in sizes.batch_clients for sync in syncs]
    cycles = [(script, clients, sync) for script in ("cycle_class_runq.pgbench",
                                                     "cycle_turn_runq.pgbench")
              for clients in sizes.clients for sync in syncs]
    write_rates = {(clients, sync): bench.paired_ledger_rates(clients, sync, sizes.pairs)
                   for clients, sync in writes}
    cycle_rates = {(script, clients, sync): bench.paired_cycle_rates(clients, sync, script,
                                                                     sizes.pairs)
                   for script, clients, sync in cycles}
    sweep_rates: dict[bool, list[float]] = {}
    for rep in range(sizes.reps):
        first_second: tuple[bool, bool] = (False, True) if rep % 2 == 0 else (True, False)
        for deadlines in first_second:
            sweep_rates.setdefault(deadlines, []).append(bench.sweep_rate(deadlines))

    def paired(first: list[float], second: list[float]) -> str:
        """Table cells: each side's median rate, then second / first pair by
        pair: the median in bold (the figure), and the lowest and highest."""
        ratios = sorted(b / a for a, b in zip(first, second, strict=True))
        return (f"{statistics.median(first):,.0f} | {statistics.median(second):,.0f}"
                f" | **{statistics.median(ratios):.2f}** | {ratios[0]:.2f} to {ratios[-1]:.2f}")

    fsync = bench.psql("SHOW fsync")
    say(f"## Cost ledger and deadlines ({sizes.pairs} pairs of {sizes.pair_seconds} s measured"
        f" in turn, the sweep median of {sizes.reps}, {sizes.seconds} s each;"
        f" server fsync={fsync})")
    say("")
    if fsync == "off":
        say("fsync is off on this server: a commit's WAL flush waits for no disk, so"
            " synchronous_commit on costs a call far less here than on a durable server"
            " (RUNQ_DATABASE_URL).")
        say("")
    say("Each ratio is the median of the pairs' ratios (the lowest and highest beside it).")
    say("")
    say("record_usage beside checkpoint, one call per transaction, each on a random run of the"
        " client's own share of 10,000 running runs, the same document in both:")
    say("")
    say("| clients | synchronous_commit | checkpoint (calls/s) | record_usage | record_usage /"
        " checkpoint | range |")
    say("|---:|---|---:|---:|---:|---|")
    for clients, sync in writes:
        say(f"| {clients} | {sync} | {paired(*write_rates[(clients, sync)])} |")
    say("")
    say(f"Cycles of runs each submitted with budget {BUDGET} and timeout {TIMEOUT} (never"
        " reached) beside runs with neither, both in one table; a cycle is claim + complete, a"
        " turn cycle claim + begin_turn (the budget gate) + complete, each its own"
        " transaction:")
    say("")
    say("| cycle | clients | synchronous_commit | without (cycles/s) | with budget and timeout"
        " | with / without | range |")
    say("|---|---:|---|---:|---:|---:|---|")
    for script, clients, sync in cycles:
        name = "claim + begin_turn + complete" if "turn" in script else "claim + complete"
        say(f"| {name} | {clients} | {sync} | {paired(*cycle_rates[(script, clients, sync)])} |")
    say("")
    plain, timed = (statistics.median(sweep_rates[d]) for d in (False, True))
    say(f"runq.sweep() with nothing to do, 1 client, over {sizes.sweep_runs:,} queued runs (a"
        " sweep that finds nothing writes nothing, so synchronous_commit does not matter):")
    say("")
    say("| queued runs | sweeps/s | ms per sweep |")
    say("|---|---:|---:|")
    say(f"| without deadlines | {plain:,.0f} | {1000 / plain:.3f} |")
    say(f"| with deadlines a day away (none due) | {timed:,.0f} | {1000 / timed:.3f} |")
    say(f"| time with / without | | **{plain / timed:.2f}** |")
    say("")


if __name__ == "__main__":
    main()
