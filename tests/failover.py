#!/usr/bin/env python3
"""The failover rig: a primary and a streaming standby on this machine, the
primary killed under load, the standby promoted, the workers following.

    tests/failover.py --failovers 20 --mode sync --out bench/results/failover-sync.md
    tests/failover.py --failovers 5 --mode async --out bench/results/failover-async.md

(`make failover` runs both.) tests/test_failover.py runs it in CI, reduced.

The servers. PostgreSQL's own programs (scripts/pg's, as root run as the
postgres user), one initdb; each server is a `postgres` process in a session
of its own, so that SIGKILL of its process group takes the postmaster and
every backend at once, as the loss of its host would (the kernel closes
their sockets, so the clients notice at once; a host that vanishes is
noticed later, by the keepalives the pool sets). A standby is made with
pg_basebackup from the primary of the moment and streams from it under the
application_name "standby". fsync is off: a killed process loses nothing
the kernel has, and this machine does not crash.

* sync: the primary has synchronous_standby_names = 'standby' (set with ALTER
  SYSTEM once its standby streams); commits wait for the standby's flush
  (synchronous_commit = on). A standby never has the setting (it is removed
  from the copy pg_basebackup makes), so the promoted one does not wait for
  a standby it does not have; the rig sets it again once a new standby
  streams from it.
* async: no synchronous standby, which streams through a TCP relay of the
  rig's (WalLink). Before each kill the relay drops what the primary sends
  for LAG seconds, so that the standby lacks what the primary committed
  meanwhile; the primary is then killed and the relay cut.

One failover: the standby is streaming (sync: as the synchronous standby),
the load runs for --load seconds, the primary's process group gets SIGKILL,
the standby is promoted at once (pg_promote), and a new standby is made from
it on the dead primary's port (a fresh data directory: the old primary is
not rejoined, pg_rewind is out of scope). The clients all connect with

    host=127.0.0.1,127.0.0.1 port=A,B target_session_attrs=read-write

so every new connection finds whichever server is the primary then.

The load. A submitter thread submits runs of kind rig.steps (keyed, so a
submit lost with its connection is sent again under its key) and three
workers run them: a Python WorkerPool of sync handlers (threads), one of
async handlers, and the TypeScript worker (clients/typescript/examples/
failover-worker.ts, a process of its own). Each run does --steps steps of
begin_turn, record_usage, a non_idempotent tool call (begin_tool, its body,
end_tool) and a checkpoint; a resumed run skips a finished call, and tells
its result that an uncertain one is unknown. Every worker writes what runq
acknowledged (and each tool body it ran) to a JSON-lines ledger.

The checks, on the last primary, once every acknowledged run has ended:
lost (an acknowledged submit, complete, fail, claim, usage, checkpoint or
tool transition absent), repeated (a run whose end was acknowledged twice,
or with two terminal events; a tool body run twice; usage recorded more
often than acknowledged; a run.fenced under the epoch that ended the run,
which only a resent write of its own can log), kill to the first claim on
the new primary, and for async replication whether each loss was
acknowledged inside a lag window (or under a claim or run_id a loss there
let the new primary give out again) and each repeat follows a loss.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgutil import PG_BIN, ROOT, free_port, pg_tool, psql

from runq import Client
from runq.pool import AsyncRunContext, RunContext, Slot, WorkerPool

KIND = "rig.steps"
CLASS = 10
DB = "runq_rig"
LEASE = timedelta(seconds=10)
LAG = 0.5  # seconds the async standby's WAL receiver is stopped before a kill
TS_DIR = ROOT / "clients" / "typescript"
TS_WORKER = TS_DIR / "dist" / "examples" / "failover-worker.js"


# -- the servers ---------------------------------------------------------------------------


def owner() -> dict[str, Any]:
    """Popen's arguments that run a server program as postgres (initdb and
    postgres refuse root)."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} \
        if os.geteuid() == 0 else {}


def dsn(port: int, dbname: str = "postgres", user: str = "postgres") -> str:
    return f"host=127.0.0.1 port={port} dbname={dbname} user={user} connect_timeout=5"


@dataclass
class Server:
    """One postgres process on a port, its data directory fresh."""

    dir: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.dir / "data"

    def start(self) -> None:
        args = [str(PG_BIN / "postgres"), "-D", str(self.data)]
        for setting in (f"port={self.port}", "listen_addresses=127.0.0.1",
                        f"unix_socket_directories={self.dir}", "fsync=off",
                        "max_connections=100", "wal_keep_size=256MB", "hot_standby=on",
                        "wal_receiver_status_interval=1s", "wal_retrieve_retry_interval=200ms",
                        "log_min_messages=warning",
                        "log_line_prefix=%m [%p] "):
            args += ["-c", setting]
        with open(self.dir / "server.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, **owner())
        until = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres on {self.port} exited:\n{self.log_tail()}")
            try:
                with psycopg.connect(dsn(self.port)):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > until:
                    self.kill()
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL to the postmaster and every backend at once."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def sql(self, query: str, params: Any = None, dbname: str = "postgres"
            ) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn(self.port, dbname), autocommit=True) as c:
            cur = c.execute(query, params)
            return cur.fetchall() if cur.description else []

    def log_tail(self, lines: int = 20) -> str:
        path = self.dir / "server.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Pair:
    """The primary and its standby, on two ports that they swap at each
    failover."""

    def __init__(self, base: Path, sync: bool) -> None:
        self.base = base
        self.sync = sync
        self.ports = (free_port(), free_port())
        self.made = 0
        self.link: WalLink | None = None
        self.primary = self._server(self.ports[0])
        subprocess.run([pg_tool("initdb"), "-D", str(self.primary.data), "-U", "postgres",
                        "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"],
                       check=True, capture_output=True, timeout=120, **owner())
        self.primary.start()
        self.standby = self.primary  # until the standby streams (close() kills both)
        try:
            self.standby = self._standby(self.ports[1])
        except BaseException:
            self.close()
            raise

    def _server(self, port: int) -> Server:
        self.made += 1
        path = self.base / f"server{self.made}"
        path.mkdir()
        shutil.chown(path, *(("postgres", "postgres") if os.geteuid() == 0 else (None, None)))
        return Server(path, port)

    def _standby(self, port: int) -> Server:
        """A new standby of the primary on port, streaming (sync: as the
        primary's synchronous standby; async: through a WalLink), caught up."""
        standby = self._server(port)
        source = self.primary.port
        if not self.sync:
            self.link = WalLink(self.primary.port)
            source = self.link.port
        # -R: the standby streams from where the backup came from.
        subprocess.run([pg_tool("pg_basebackup"), "-D", str(standby.data), "-X", "stream",
                        "-c", "fast", "--no-sync", "-R", "-d",
                        dsn(source) + " application_name=standby"],
                       check=True, capture_output=True, timeout=120, **owner())
        # A standby never waits for a standby of its own: the promoted one
        # must not wait for one that does not exist yet.
        auto = standby.data / "postgresql.auto.conf"
        kept = [line for line in auto.read_text().splitlines()
                if not line.startswith("synchronous_standby_names")]
        auto.write_text("\n".join(kept) + "\n")
        try:
            standby.start()
            self._await_standby("async")
            if self.sync:
                self.primary.sql("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
                self.primary.sql("SELECT pg_reload_conf()")
                self._await_standby("sync")
        except BaseException:
            standby.kill()
            raise
        return standby

    def _await_standby(self, wanted: str) -> None:
        target = self.primary.sql("SELECT pg_current_wal_lsn()")[0][0]
        until = time.monotonic() + 60
        while True:
            rows = self.primary.sql(
                "SELECT state, sync_state, replay_lsn >= %s FROM pg_stat_replication"
                " WHERE application_name = 'standby'", [target])
            if rows and rows[0][0] == "streaming" and rows[0][2] and rows[0][1] == wanted:
                return
            if time.monotonic() > until:
                raise TimeoutError(f"the standby did not catch up: {rows}")
            time.sleep(0.05)

    def conninfo(self, dbname: str, user: str) -> str:
        a, b = self.ports
        return (f"host=127.0.0.1,127.0.0.1 port={a},{b} dbname={dbname} user={user}"
                " target_session_attrs=read-write connect_timeout=5")

    def failover(self, lag: float) -> Failover:
        """Kill the primary, promote the standby, make a new standby on the
        dead primary's port. lag > 0: the standby's WAL receiver is stopped
        that long first (async replication)."""
        paused = None
        if self.link is not None:
            self.link.hold()
            paused = time.time()
            time.sleep(lag)
        killed = time.time()
        self.primary.kill()
        if self.link is not None:
            self.link.cut()
        if not self.standby.sql("SELECT pg_promote(true, 60)")[0][0]:
            raise RuntimeError(f"the standby was not promoted:\n{self.standby.log_tail()}")
        promoted = time.time()
        old, self.primary = self.primary, self.standby
        self.standby = self._standby(old.port)
        shutil.rmtree(old.dir, ignore_errors=True)
        return Failover(killed=killed, promoted=promoted, paused=paused)

    def close(self) -> None:
        for server in (self.primary, self.standby):
            server.kill()
        if self.link is not None:
            self.link.cut()


class WalLink:
    """A TCP relay from an async standby to its primary. hold(): what the
    primary sends no longer reaches the standby (dropped on the way); cut():
    every connection closed, and no new one. As a network that parted the
    two before the primary's host died: the standby lacks what was held."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.held = threading.Event()
        self.sockets: list[socket.socket] = [self.listener]
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, name="wal-link", daemon=True).start()

    def hold(self) -> None:
        self.held.set()

    def cut(self) -> None:
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
                up = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            with self.lock:
                self.sockets += [down, up]
            for src, dst, wal in ((down, up, False), (up, down, True)):
                threading.Thread(target=self._pump, args=(src, dst, wal), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, wal: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not (wal and self.held.is_set()):
                    dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@dataclass
class Failover:
    killed: float  # wall clock, as the servers' timestamps
    promoted: float
    paused: float | None  # async: when the WAL link began to hold
    first_claim: float | None = None
    held: list[tuple[int, int]] = field(default_factory=list)  # running just before the kill
    carried: int = 0  # of those, how many succeeded under the same epoch


# -- the ledger ----------------------------------------------------------------------------


class Acks:
    """What runq acknowledged to one worker, one JSON object a line:
    {"t", "worker", "op", "run_id", "epoch", ...}."""

    def __init__(self, path: Path, worker: str) -> None:
        self.path = path
        self.worker = worker
        self.lock = threading.Lock()

    def write(self, run_id: int, epoch: int, op: str, **fields: Any) -> None:
        line = json.dumps({"t": time.time(), "worker": self.worker, "op": op,
                           "run_id": str(run_id), "epoch": str(epoch), **fields})
        with self.lock, open(self.path, "a") as out:
            out.write(line + "\n")


def read_acks(paths: list[Path]) -> list[dict[str, Any]]:
    acks = []
    for path in paths:
        if path.exists():
            acks += [json.loads(line) for line in path.read_text().splitlines() if line]
    for a in acks:
        a["run_id"], a["epoch"] = int(a["run_id"]), int(a["epoch"])
    return acks


# -- the handlers (the TypeScript worker's does the same) ----------------------------------


def steps(ctx: RunContext, acks: Acks) -> dict[str, Any]:
    ack = functools.partial(acks.write, ctx.run_id, ctx.epoch)
    ack("started")
    calls = {t.call_id: t.status for t in ctx.tool_calls()} if ctx.run.attempt > 1 else {}
    total, pause = ctx.run.payload["steps"], ctx.run.payload["pause_ms"] / 1000
    step = (ctx.run.checkpoint or {}).get("step", 0)
    uncertain = []
    while step < total:
        ctx.begin_turn()
        ack("usage", step=step, ours=ctx.record_usage({"tokens": 1}))
        call_id = f"effect-{step}"
        if calls.get(call_id) == "uncertain":
            uncertain.append(call_id)
            ack("uncertain", call_id=call_id)
        elif calls.get(call_id) != "finished":
            ctx.begin_tool(call_id, "effect", "non_idempotent", {"step": step})
            ack("tool_started", call_id=call_id)
            ack("effect", call_id=call_id)
            ctx.end_tool(call_id, {"step": step})
            ack("tool_finished", call_id=call_id)
        time.sleep(pause)
        ctx.checkpoint({"step": step + 1})
        ack("checkpoint", step=step + 1)
        step += 1
    return {"steps": total, "uncertain": uncertain}


async def steps_async(ctx: AsyncRunContext, acks: Acks) -> dict[str, Any]:
    ack = functools.partial(acks.write, ctx.run_id, ctx.epoch)
    ack("started")
    calls = ({t.call_id: t.status for t in await ctx.tool_calls()}
             if ctx.run.attempt > 1 else {})
    total, pause = ctx.run.payload["steps"], ctx.run.payload["pause_ms"] / 1000
    step = (ctx.run.checkpoint or {}).get("step", 0)
    uncertain = []
    while step < total:
        await ctx.begin_turn()
        ack("usage", step=step, ours=await ctx.record_usage({"tokens": 1}))
        call_id = f"effect-{step}"
        if calls.get(call_id) == "uncertain":
            uncertain.append(call_id)
            ack("uncertain", call_id=call_id)
        elif calls.get(call_id) != "finished":
            await ctx.begin_tool(call_id, "effect", "non_idempotent", {"step": step})
            ack("tool_started", call_id=call_id)
            ack("effect", call_id=call_id)
            await ctx.end_tool(call_id, {"step": step})
            ack("tool_finished", call_id=call_id)
        await asyncio.sleep(pause)
        await ctx.checkpoint({"step": step + 1})
        ack("checkpoint", step=step + 1)
        step += 1
    return {"steps": total, "uncertain": uncertain}


# -- the load ------------------------------------------------------------------------------


class Submitter(threading.Thread):
    """Submits keyed runs at a steady rate, each until runq acknowledges it
    (a submit lost with its connection is sent again under its key), never
    more than backlog ahead of the runs acknowledged as ended."""

    def __init__(self, conninfo: str, rate: float, steps: int, pause_ms: int,
                 backlog: int, ended: Callable[[], int]) -> None:
        super().__init__(name="rig-submitter", daemon=True)
        self.conninfo = conninfo
        self.rate, self.steps, self.pause_ms = rate, steps, pause_ms
        self.backlog, self.ended = backlog, ended
        self.acked: dict[str, int] = {}  # idempotency key -> run_id
        self.acked_at: dict[str, float] = {}
        self.retries = 0
        self.stopping = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self._submit_all()
        except Exception as error:
            self.error = error

    def _submit_all(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        n = 0
        while not self.stopping.is_set():
            if len(self.acked) - self.ended() >= self.backlog:
                time.sleep(0.05)
                continue
            key = f"rig-{n}"
            while not self.stopping.is_set():
                try:
                    if conn is None or conn.closed or conn.broken:
                        conn = psycopg.connect(self.conninfo, autocommit=True)
                    run = Client(conn).submit(
                        "rig", KIND, payload={"steps": self.steps, "pause_ms": self.pause_ms},
                        priority=CLASS, idempotency_key=key)
                    self.acked[key] = run.run_id
                    self.acked_at[key] = time.time()
                    break
                except psycopg.OperationalError:
                    self.retries += 1
                    time.sleep(0.05)
            n += 1
            time.sleep(1 / self.rate)
        if conn is not None:
            conn.close()


class TsWorker:
    """clients/typescript/examples/failover-worker.ts in a process of its own."""

    def __init__(self, conninfo_url: str, log: Path, out: Path, concurrency: int) -> None:
        build_ts_worker()
        env = {**os.environ, "RUNQ_DATABASE_URL": conninfo_url, "RIG_LOG": str(log),
               "RIG_CONCURRENCY": str(concurrency),
               "RIG_LEASE_MS": str(int(LEASE.total_seconds() * 1000)),
               "RIG_CLASSES": str(CLASS)}
        self.out = out
        with open(out, "ab") as sink:
            self.proc = subprocess.Popen(["node", str(TS_WORKER)], env=env, stdout=sink,
                                         stderr=subprocess.STDOUT)
        until = time.monotonic() + 30
        while "ready" not in out.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > until:
                self.stop()
                raise RuntimeError(f"the TypeScript worker did not start:\n{self.tail()}")
            time.sleep(0.05)

    def stop(self) -> int | None:
        """SIGTERM, then its exit code (None: it was still running; killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.out.read_text(errors="replace").splitlines()[-lines:])


def build_ts_worker() -> None:
    """npm ci and tsc when the program is missing or older than its sources."""
    sources = [*TS_DIR.glob("src/*.ts"), *TS_DIR.glob("examples/*.ts")]
    if TS_WORKER.exists() and all(s.stat().st_mtime <= TS_WORKER.stat().st_mtime
                                  for s in sources):
        return
    if not (TS_DIR / "node_modules").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=TS_DIR, check=True, capture_output=True, timeout=600)
    subprocess.run(["npm", "run", "build"], cwd=TS_DIR, check=True, capture_output=True,
                   timeout=300)


def url_of(conninfo: str) -> str:
    """The multi-host conninfo as the URL the TypeScript client reads."""
    params = dict(p.split("=", 1) for p in conninfo.split())
    hosts = ",".join(f"{h}:{p}" for h, p in zip(params["host"].split(","),
                                               params["port"].split(","), strict=True))
    return (f"postgresql://{params['user']}@{hosts}/{params['dbname']}"
            f"?target_session_attrs={params['target_session_attrs']}")


# -- one run of the rig --------------------------------------------------------------------


@dataclass
class Options:
    failovers: int = 3
    sync: bool = True
    load: float = 3.0  # seconds of load before each kill
    steps: int = 4
    pause_ms: int = 20
    rate: float = 40.0  # submits a second
    backlog: int = 60
    slots: int = 4  # per Python pool, and the TypeScript worker's loops
    typescript: bool = True
    drain: float = 120.0


@dataclass
class Outcome:
    options: Options
    failovers: list[Failover]
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Any]] = field(default_factory=dict)
    unexplained: list[str] = field(default_factory=list)
    ts_exit: int | None = 0
    errors: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)

    def kill_to_claim(self) -> list[float]:
        return [f.first_claim - f.killed for f in self.failovers if f.first_claim is not None]


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    # Not a private temp dir of root's: the servers run as postgres.
    path = Path(tempfile.mkdtemp(prefix="runq-failover-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def deploy(pair: Pair) -> None:
    pair.primary.sql(f"CREATE DATABASE {DB}")
    url = f"postgresql://postgres@127.0.0.1:{pair.primary.port}/{DB}"
    psql(url, "-f", str(ROOT / "sql" / "runq.sql"))
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE ROLE rig_worker LOGIN IN ROLE runq_worker")
        c.execute("CREATE ROLE rig_client LOGIN IN ROLE runq_client")
        c.execute("UPDATE runq.settings SET backoff_base = '200 ms', backoff_cap = '1 s'")
    pair.primary.sql("CHECKPOINT")


def run_rig(options: Options, base: Path, say: Callable[[str], None] = print) -> Outcome:
    """The failovers under load, then the checks; the servers are killed at
    the end whatever happened."""
    pair = Pair(base, options.sync)
    try:
        return load_and_fail_over(pair, options, base, say)
    finally:
        pair.close()


def load_and_fail_over(pair: Pair, options: Options, base: Path,
                       say: Callable[[str], None]) -> Outcome:
    outcome = Outcome(options, [])
    logs: list[Path] = []
    pools: list[WorkerPool] = []
    ts: TsWorker | None = None
    submitter: Submitter | None = None
    ended: set[int] = set()
    lock = threading.Lock()

    def on_finished(run_id: int, epoch: int, status: str, *, acks: Acks) -> None:
        acks.write(run_id, epoch, status)
        with lock:
            ended.add(run_id)

    try:
        deploy(pair)
        worker_info = pair.conninfo(DB, "rig_worker")
        for flavour in ("sync", "async"):
            acks = Acks(base / f"acks-{flavour}.jsonl", f"py-{flavour}")
            logs.append(acks.path)
            handler = functools.partial(steps if flavour == "sync" else steps_async,
                                        acks=acks)
            pool = WorkerPool(
                worker_info, {KIND: handler}, [Slot((CLASS,), options.slots)], lease=LEASE,
                poll_interval=0.2, sweep_interval=1.0, tick_interval=None, grace=2.0,
                worker_id=f"py-{flavour}",
                on_finished=functools.partial(on_finished, acks=acks))
            pool.start()
            pools.append(pool)
        if options.typescript:
            logs.append(base / "acks-ts.jsonl")
            ts = TsWorker(url_of(worker_info), logs[-1], base / "ts-worker.out", options.slots)
        # The TypeScript worker's ends count for the backlog too (read from its ledger).
        ts_ended = TsEnded(logs[-1] if options.typescript else None)
        submitter = Submitter(pair.conninfo(DB, "rig_client"), options.rate, options.steps,
                              options.pause_ms, options.backlog,
                              lambda: len(ended) + ts_ended.count())
        submitter.start()
        for i in range(options.failovers):
            time.sleep(options.load)
            before = len(submitter.acked)
            held = [(r, e) for r, e in pair.primary.sql(
                "SELECT run_id, lease_epoch FROM runq.runs WHERE status = 'running'",
                dbname=DB)]
            f = pair.failover(LAG if not options.sync else 0.0)
            f.held = held
            f.first_claim = first_claim(pair, f.killed)
            outcome.failovers.append(f)
            say(f"failover {i + 1}: kill to promoted {f.promoted - f.killed:.2f} s, to the"
                f" first claim {f.first_claim - f.killed if f.first_claim else float('nan'):.2f}"
                f" s; {before} runs submitted, {len(held)} running at the kill")
        time.sleep(options.load)
        submitter.stopping.set()
        submitter.join(30)
        if submitter.error is not None:
            outcome.errors.append(f"the submitter failed: {submitter.error!r}")
        drain(pair, set(submitter.acked.values()), options.drain)
    finally:
        for pool in pools:
            pool.stop()
        for pool in pools:
            pool.join()
        if ts is not None:
            outcome.ts_exit = ts.stop()
            if outcome.ts_exit != 0:
                outcome.errors.append(f"the TypeScript worker exited {outcome.ts_exit}:\n"
                                      f"{ts.tail()}")
        if submitter is not None:
            submitter.stopping.set()
    check(pair, submitter, read_acks(logs), outcome)
    return outcome


class TsEnded:
    """How many runs the TypeScript worker's ledger says ended (read as it grows)."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.offset = path, 0
        self.runs: set[str] = set()

    def count(self) -> int:
        if self.path is None or not self.path.exists():
            return len(self.runs)
        with open(self.path) as f:
            f.seek(self.offset)
            for line in f:
                if not line.endswith("\n"):
                    break
                self.offset += len(line.encode())
                a = json.loads(line)
                if a["op"] in ("succeeded", "failed"):
                    self.runs.add(a["run_id"])
        return len(self.runs)


def first_claim(pair: Pair, killed: float) -> float | None:
    """When the new primary logged its first claim after the kill (None:
    none within a minute)."""
    until = time.monotonic() + 60
    while time.monotonic() < until:
        at = pair.primary.sql(
            "SELECT extract(epoch FROM min(created_at))::float8 FROM runq.run_events"
            " WHERE type = 'run.claimed' AND created_at > to_timestamp(%s)", [killed],
            dbname=DB)[0][0]
        if at is not None:
            return float(at)
        time.sleep(0.02)
    return None


def drain(pair: Pair, runs: set[int], within: float) -> None:
    """Wait until every acknowledged run has ended."""
    until = time.monotonic() + within
    while time.monotonic() < until:
        live = pair.primary.sql(
            "SELECT count(*) FROM runq.runs WHERE run_id = ANY(%s)"
            " AND status NOT IN ('succeeded', 'failed', 'cancelled')", [sorted(runs)],
            dbname=DB)[0][0]
        if live == 0:
            return
        time.sleep(0.2)


# -- the checks ----------------------------------------------------------------------------

TERMINAL = ("run.succeeded", "run.failed", "run.cancelled")
LOST = ("submits", "claims", "ends", "usage records", "checkpoints", "tool starts",
        "tool ends")
REPEATED = ("runs whose end was acknowledged twice", "runs with two terminal events",
            "tool bodies run twice", "usage records counted twice",
            "run.fenced under the epoch that ended the run")


def check(pair: Pair, submitter: Submitter, acks: list[dict[str, Any]],
          outcome: Outcome) -> None:
    """Counts what was lost and what was repeated, from the ledger and the
    last primary's tables; for async replication, which of them fall in a
    lag window."""
    with psycopg.connect(dsn(pair.primary.port, DB)) as c:
        runs: dict[int, str] = dict(c.execute("SELECT run_id, status FROM runq.runs").fetchall())
        keys: dict[str, int] = dict(c.execute(
            "SELECT idempotency_key, run_id FROM runq.idempotency_keys"
            " WHERE tenant_id = 'rig'").fetchall())
        events = c.execute("SELECT run_id, epoch, type, payload FROM runq.run_events"
                           " WHERE type <> 'run.created'").fetchall()
        # A lost submit's run_id may belong to another run since: not counted.
        outcome.statuses = dict(Counter(runs[r] for k, r in submitter.acked.items()
                                        if r in runs and keys.get(k) == r))
        outcome.statuses.update({f"failed: {code}": n for code, n in c.execute(
            "SELECT failure ->> 'code', count(*) FROM runq.runs WHERE status = 'failed'"
            " GROUP BY 1").fetchall()})
    outcome.events = dict(Counter(e[2] for e in events))

    claims = Counter((r, e) for r, e, t, _ in events if t == "run.claimed")
    ended = {(r, e, t.removeprefix("run.")) for r, e, t, _ in events if t in TERMINAL}
    usage = Counter((r, e) for r, e, t, _ in events if t == "run.usage")
    checkpoints = Counter((r, e) for r, e, t, _ in events if t == "run.checkpointed")
    tools = {(r, e, t, p.get("call_id")) for r, e, t, p in events
             if t in ("run.tool_started", "run.tool_finished")}

    lost: dict[str, list[dict[str, Any]]] = {name: [] for name in LOST}
    for key, run_id in submitter.acked.items():
        if keys.get(key) != run_id or run_id not in runs:
            lost["submits"].append({"key": key, "run_id": run_id,
                                    "t": submitter.acked_at[key]})
    acked_claims: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    acked_usage: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    acked_checkpoints: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for a in sorted(acks, key=lambda a: float(a["t"])):
        run, epoch, op = a["run_id"], a["epoch"], a["op"]
        if op == "started":
            acked_claims[run, epoch].append(a)
        elif op in ("succeeded", "failed") and (run, epoch, op) not in ended:
            lost["ends"].append(a)
        elif op == "usage":
            acked_usage[run, epoch].append(a)
        elif op == "checkpoint":
            acked_checkpoints[run, epoch].append(a)
        elif op == "tool_started" and (run, epoch, "run.tool_started", a["call_id"]) not in tools:
            lost["tool starts"].append(a)
        elif op == "tool_finished" \
                and (run, epoch, "run.tool_finished", a["call_id"]) not in tools:
            lost["tool ends"].append(a)
    # An epoch is claimed once per history: a second claim of the same run
    # and epoch (by whichever worker) was given out again by a new primary
    # that lost the first, the earlier; the last ones of usage records and
    # checkpoints are those a lost tail of WAL took.
    for name, acked, logged, last in (("claims", acked_claims, claims, False),
                                      ("usage records", acked_usage, usage, True),
                                      ("checkpoints", acked_checkpoints, checkpoints, True)):
        for run_epoch, items in acked.items():
            missing = len(items) - logged[run_epoch]
            if missing > 0:
                lost[name] += items[len(items) - missing:] if last else items[:missing]
    counted_twice = [k for k, n in usage.items() if n > len(acked_usage.get(k, []))]
    fenced_ends = sorted({(r, e) for r, e, t, _ in events if t == "run.fenced"
                          and ((r, e, "succeeded") in ended or (r, e, "failed") in ended)})

    for f in outcome.failovers:
        f.carried = sum(1 for r, e in f.held if (r, e, "succeeded") in ended)
    ends = Counter(a["run_id"] for a in acks if a["op"] in ("succeeded", "failed"))
    terminal = Counter(r for r, _, t, _ in events if t in TERMINAL)
    bodies = Counter((a["run_id"], a["call_id"]) for a in acks if a["op"] == "effect")
    repeated = {
        "runs whose end was acknowledged twice": [r for r, n in ends.items() if n > 1],
        "runs with two terminal events": [r for r, n in terminal.items() if n > 1],
        "tool bodies run twice": [k for k, n in bodies.items() if n > 1],
        "usage records counted twice": counted_twice,
        "run.fenced under the epoch that ended the run": fenced_ends,
    }
    not_ended = [r for r in submitter.acked.values()
                 if r in runs and runs[r] not in ("succeeded", "failed", "cancelled")]

    for name in LOST:
        outcome.counts[f"lost {name}"] = len(lost[name])
        outcome.examples[f"lost {name}"] = lost[name][:3]
    for name in REPEATED:
        outcome.counts[name] = len(repeated[name])
        outcome.examples[name] = repeated[name][:3]
    outcome.counts["runs submitted (acknowledged)"] = len(submitter.acked)
    by_worker = Counter(a["worker"].split(":")[0] for a in acks
                        if a["op"] in ("succeeded", "failed"))
    for worker, n in sorted(by_worker.items()):
        outcome.counts[f"runs ended by {worker}"] = n
    outcome.counts["submits sent again after a lost connection"] = submitter.retries
    outcome.counts["runs not ended at the end"] = len(not_ended)
    outcome.counts["uncertain tool calls told to the handler"] = sum(
        1 for a in acks if a["op"] == "uncertain")
    outcome.examples["runs not ended at the end"] = not_ended[:3]

    # Async replication: what the standby did not have is what the primary
    # acknowledged while the WAL link held (or just before: WAL on its way),
    # up to the kill (an acknowledgement is written just after the call
    # returned; nothing is acknowledged between the kill and the promotion).
    # A repeat follows a loss of the same run.
    # A lost claim lets the new primary give the same epoch to another
    # worker, and a lost submit the same run_id to another run: what either
    # then writes answers for the first (a probe counting our epoch's usage
    # counts the other's), so a loss of that run and epoch later on is that
    # loss too.
    windows = [(f.paused - 0.25, f.promoted) for f in outcome.failovers if f.paused is not None]

    def in_window(a: dict[str, Any]) -> bool:
        return any(lo <= a["t"] <= hi for lo, hi in windows)
    reissued = {(a["run_id"], a["epoch"]) for a in lost["claims"] if in_window(a)}
    reissued_runs = {a["run_id"] for a in lost["submits"] if in_window(a)}
    lost_runs: set[int] = set()
    by = Counter[str]()
    for name in LOST:
        for a in lost[name]:
            if in_window(a):
                by["acknowledged in a lag window"] += 1
            elif (a["run_id"], a.get("epoch")) in reissued or a["run_id"] in reissued_runs:
                by["after it, under a reissued epoch or run_id"] += 1
            else:
                outcome.unexplained.append(f"lost {name}: {a}")
                continue
            lost_runs.add(a["run_id"])
    if windows:
        for why, n in sorted(by.items()):
            outcome.counts[f"losses {why}"] = n
    for name in REPEATED:
        for item in repeated[name]:
            run = item[0] if isinstance(item, tuple) else item
            if run not in lost_runs:
                outcome.unexplained.append(f"{name}: run {run} lost nothing acknowledged")


def report(outcome: Outcome) -> str:
    o = outcome.options
    times = outcome.kill_to_claim()
    mode = "sync" if o.sync else "async"
    ts = f" and the TypeScript worker ({o.slots} loops)" if o.typescript else ""
    lines = [
        f"# Failover under load: {'synchronous' if o.sync else 'asynchronous'} replication",
        "",
        (f"{len(outcome.failovers)} failovers (`tests/failover.py --failovers {o.failovers}"
         f" --mode {mode}`), PostgreSQL {PG_BIN.parent.name}: a primary and a streaming"
         f" standby on one machine, the primary's processes killed (SIGKILL) after"
         f" {o.load:g} s of load each time, the standby promoted at once, a new standby made"
         f" from it. Load: a Python pool of sync handlers and one of async handlers"
         f" ({o.slots} slots each){ts}, runs of {o.steps} steps (turn, usage, a"
         f" non_idempotent tool call, a checkpoint), {o.rate:g} submits a second, lease"
         f" {LEASE.total_seconds():g} s."),
        "",
        "| count | value |", "| --- | ---: |",
        *[f"| {name} | {value} |" for name, value in outcome.counts.items()],
        "",
    ]
    held = sum(len(f.held) for f in outcome.failovers)
    carried = sum(f.carried for f in outcome.failovers)
    lines += [(f"Runs running at a kill: {held}; of those, succeeded under the epoch they"
               f" held then: {carried}."), ""]
    if times:
        promoted = max(f.promoted - f.killed for f in outcome.failovers)
        lines += [(f"Kill to the first claim on the new primary: p50"
                   f" {statistics.median(times):.2f} s, max {max(times):.2f} s (kill to"
                   f" promoted: max {promoted:.2f} s)."), ""]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(outcome.statuses.items()))
    events = ", ".join(f"{k} {v}" for k, v in sorted(outcome.events.items()))
    lines += [f"Runs by status at the end: {statuses}.", "", f"Events: {events}.", ""]
    if not o.sync:
        verdict = "all" if not outcome.unexplained else "not all"
        lines += [(f"Explained (acknowledged inside a lag window of {LAG:g} s, or a repeat"
                   f" of a run that lost something there): {verdict}; unexplained:"
                   f" {len(outcome.unexplained)}."), ""]
        lines += [f"- {u}" for u in outcome.unexplained[:10]]
    examples = {k: v for k, v in outcome.examples.items() if v}
    if examples:
        lines += ["Examples:", "", *[f"- {k}: {v}" for k, v in examples.items()], ""]
    if outcome.errors:
        lines += ["Errors:", "", *[f"- {e}" for e in outcome.errors], ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--mode", choices=("sync", "async"), default="sync")
    ap.add_argument("--load", type=float, default=3.0, help="seconds of load before each kill")
    ap.add_argument("--no-typescript", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    options = Options(failovers=args.failovers, sync=args.mode == "sync", load=args.load,
                      typescript=not args.no_typescript)
    with workspace() as base:
        outcome = run_rig(options, base)
    text = report(outcome)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
