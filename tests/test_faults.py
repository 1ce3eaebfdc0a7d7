"""Faults with real processes and a real server.

The test starts its own PostgreSQL cluster (``RUNQ_PG_DIR=<tmp> scripts/pg
start``), deploys runq there from sql/runq.sql, and removes the cluster at the
end, because it restarts that server and must not disturb anyone else's. It
needs neither RUNQ_DATABASE_URL nor the shared fixtures. Workers and
submitters log in as roles holding only runq_worker and runq_client.

Load: at least RUNS runs (5,000; 30,000 with RUNQ_SOAK=1) of a small agent
loop (tests/fault_handlers.py: begin_turn, begin_tool, end_tool, checkpoint
and short sleeps per step; a few slow runs), recovery policy ``resume``,
max_attempts 10, submitted by one client while four worker processes
(``python -m runq.pool fault_handlers``, lease 2 s, sweeping every second)
work them off. The client never lets more than BACKLOG runs wait, and goes on
past RUNS until the faults are over. A third of the runs carry an
idempotency key and their own session; half of those are submitted a second
time by another client shortly after the first, and some again at the end.

Faults, spread over the load in this order (RUNQ_SOAK=1 repeats the cycle):
  * SIGKILL of a worker process that holds runs (a new process replaces it);
  * SIGSTOP of a worker process holding runs until each of them has been
    swept and claimed again by another process, then SIGCONT: its handlers
    wake up and write under their stale epochs;
  * pg_terminate_backend of the pool connections of every worker (claims,
    the runs' writes, sweeps);
  * ``pg_ctl restart -m immediate`` of the server, with submits and runs in
    flight;
  * pg_terminate_backend of every heartbeat and LISTEN connection;
  * another SIGKILL.
The test fails if the faults did not bite (no run held by a killed or stopped
worker, no stale write fenced, no backend terminated). After each connection
fault every live worker must be back to its full set of connections (one for
heartbeats, one for LISTEN, one to four shared by the rest), found through
/proc and pg_stat_activity: a loop of the pool that died shows up there, and so does
a traceback in a worker's log.
A submit that dies with its connection is retried when it has an idempotency
key; without one it is not (its outcome is unknown: the run may or may not
exist, and it is counted either way).

When the last run has been submitted, one more worker is killed and the
others get SIGTERM (they release what they hold), leaving runs queued and
running; a later, clean pool runs until every run is terminal. Then, from the
tables:
  * accounted: every acknowledged submit is exactly one run, every run is
    terminal, dead-lettered ones included;
  * at most one terminal transition per run in the event log, matching the
    run's status;
  * no write from a stale epoch applied: after each run.claimed at epoch N no
    event of epoch < N other than run.fenced; no checkpoint or tool_calls row
    of an epoch written after that epoch's run was claimed again; every row
    agrees with the event of its own transaction; a succeeded run's result
    was written by its last epoch;
  * no idempotency key maps to two runs, and every repeat returned the
    original run as a duplicate.
The counts are printed whether the test passes or not.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgutil import PG_BIN, ROOT, create_database, psql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from runq import Client

SOAK = os.environ.get("RUNQ_SOAK") == "1"
RUNS = 30_000 if SOAK else 5_000
CYCLES = 6 if SOAK else 1  # fault cycles (kill, stop, terminate, restart, kill)
BACKLOG = 150  # the submitter waits while more runs than this are queued
LEASE = 2.0
SWEEP_EVERY = 1.0
POLL = 0.5
MAX_ATTEMPTS = 10
WORKERS = 4
SLOTS = (("0", 1), ("0,10", 5))  # per worker process: 6 slot threads
FINAL_SLOTS = (("0", 2), ("0,10", 8))
GAP = 1.5  # seconds between two faults
RECONNECT_WITHIN = 20.0
DRAIN_WITHIN = 240.0 if SOAK else 90.0

TERMINAL = ("succeeded", "failed", "cancelled")


# -- the private server -------------------------------------------------------------


def as_owner(*command: str) -> list[str]:
    """initdb and pg_ctl refuse root: run them as postgres, as scripts/pg does."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return list(command)


@dataclass
class Cluster:
    """A throwaway cluster of scripts/pg in a directory of its own."""

    dir: Path
    url: str = ""

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "RUNQ_PG_DIR": str(self.dir)}

    def start(self) -> str:
        proc = subprocess.run([str(ROOT / "scripts" / "pg"), "start"], env=self.env,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"scripts/pg start failed:\n{proc.stdout}{proc.stderr}"
        self.url = proc.stdout.strip().splitlines()[-1]
        return self.url

    def restart_immediate(self) -> float:
        """pg_ctl restart -m immediate (it reuses the start options); seconds taken.
        -l keeps the new postmaster off our pipes."""
        began = time.monotonic()
        proc = subprocess.run(
            as_owner(str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-l",
                     str(self.dir / "server.log"), "-m", "immediate", "-w", "-t", "60",
                     "restart"),
            capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"pg_ctl restart failed:\n{proc.stdout}{proc.stderr}"
        return time.monotonic() - began

    def stop(self) -> None:
        subprocess.run([str(ROOT / "scripts" / "pg"), "stop"], env=self.env,
                       capture_output=True, text=True, check=False)


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not pytest's tmp_path: the server runs as postgres, which must reach it.
    path = Path(tempfile.mkdtemp(prefix="runq-faults-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cluster(workdir: Path) -> Iterator[Cluster]:
    c = Cluster(workdir / "pg")
    c.start()
    yield c
    c.stop()


def deploy(cluster: Cluster) -> tuple[str, str, str]:
    """runq in database runq_faults; (admin, worker, client) conninfos."""
    admin = create_database(cluster.url, "runq_faults")
    psql(admin, "-f", str(ROOT / "sql" / "runq.sql"))
    with psycopg.connect(admin, autocommit=True) as c:
        # scripts/pg runs with synchronous_commit=off, which may lose the last
        # acknowledged commits in a crash (an immediate shutdown is one): a
        # durable queue is tested with durable commits.
        c.execute("ALTER DATABASE runq_faults SET synchronous_commit = on")
        # Backoff short enough for the test (the DBA's knobs), with a base far
        # above a statement's duration: the row checks in check() rely on it.
        c.execute("UPDATE runq.settings SET backoff_base = '500 ms', backoff_cap = '1 s'")
        c.execute("CREATE ROLE fault_worker LOGIN IN ROLE runq_worker")
        c.execute("CREATE ROLE fault_client LOGIN IN ROLE runq_client")
    return (admin, make_conninfo(admin, user="fault_worker"),
            make_conninfo(admin, user="fault_client"))


def connect_retrying(conninfo: str, deadline: float = 60.0) -> psycopg.Connection[Any]:
    """A connection, waiting out a restart."""
    until = time.monotonic() + deadline
    while True:
        try:
            return psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
        except psycopg.OperationalError:
            if time.monotonic() > until:
                raise
            time.sleep(0.2)


def query(conninfo: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    for attempt in range(50):
        try:
            with connect_retrying(conninfo) as c:
                return c.execute(sql, params).fetchall()
        except psycopg.OperationalError:  # the server restarted under us
            if attempt == 49:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


# -- worker processes ------------------------------------------------------------------


def socket_ports(pid: int, server_port: int) -> set[int]:
    """Local ports of the process's established TCP connections to the server."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        ports = set()
        for table in ("tcp", "tcp6"):
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[9] in inodes and cols[3] == "01" \
                            and int(cols[2].rsplit(":", 1)[1], 16) == server_port:
                        ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    except FileNotFoundError:
        return set()
    return ports


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    slots: int
    killed: bool = False

    @classmethod
    def spawn(cls, name: str, conninfo: str, workdir: Path,
              slots: tuple[tuple[str, int], ...] = SLOTS) -> Worker:
        log = workdir / f"{name}.log"
        args = [sys.executable, "-m", "runq.pool", "fault_handlers", "--database-url", conninfo,
                "--lease", str(LEASE), "--sweep-every", str(SWEEP_EVERY), "--poll", str(POLL),
                "--grace", "1", "--worker-id", name]
        for classes, count in slots:
            args += ["--slot", f"{classes}:{count}"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH")) if p)}
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, env=env, cwd=workdir, stdout=out,
                                    stderr=subprocess.STDOUT)
        return cls(name, proc, log, sum(n for _, n in slots))

    def connections(self, admin: str, server_port: int) -> dict[str, int]:
        """This process's server connections by application_name."""
        ports = socket_ports(self.proc.pid, server_port)
        return dict(query(
            admin, "SELECT application_name, count(*) FROM pg_stat_activity"
                   " WHERE usename = 'fault_worker' AND client_port = ANY(%s)"
                   " GROUP BY application_name", [sorted(ports)]))

    @staticmethod
    def full_set(have: dict[str, int]) -> bool:
        """One heartbeat and one LISTEN connection, and between one and
        the pool's 4 (its default max_connections) for everything else."""
        return (have.get("runq-pool-heartbeat") == 1 and have.get("runq-pool-listen") == 1
                and 1 <= have.get("runq-pool", 0) <= 4 and len(have) == 3)

    def held(self, admin: str) -> list[tuple[int, int]]:
        return [(r, e) for r, e in query(
            admin, "SELECT run_id, lease_epoch FROM runq.runs"
                   " WHERE status = 'running' AND lease_owner = %s", [self.name])]

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace").splitlines()
        return f"--- {self.name} ({self.log}) ---\n" + "\n".join(text[-lines:])


# -- submitters ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    n: int
    token: str
    key: str | None
    session: str | None
    priority: int
    steps: int
    pause: float

    @property
    def payload(self) -> dict[str, Any]:
        return {"token": self.token, "steps": self.steps, "pause": self.pause}


def make_spec(n: int) -> Spec:
    keyed = n % 3 == 0
    slow = n % 25 == 7  # 4 %: long enough to be caught by every fault
    return Spec(n=n, token=f"t{n}", key=f"key-{n}" if keyed else None,
                session=f"s-{n}" if keyed else None, priority=0 if n % 4 == 1 else 10,
                steps=3 if slow else 1 + n % 3, pause=0.25 if slow else 0.004 * (1 + n % 4))


@dataclass
class Ledger:
    """What the clients were told."""

    specs: list[Spec] = field(default_factory=list)  # every spec the submitter sent
    acked: dict[str, int] = field(default_factory=dict)  # token -> run_id
    unknown: set[str] = field(default_factory=set)  # unkeyed submit lost with its connection
    outcomes: Counter[str] = field(default_factory=Counter)
    retried: int = 0  # keyed submits sent again after a lost connection
    repeats: int = 0  # deliberate second (or third) submits of a key
    repeat_mismatch: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Submitter(threading.Thread):
    """Submits through runq's Client and survives restarts. The first
    submitter sends runs until it has sent RUNS and the faults are over, never
    letting more than BACKLOG runs wait (so load lasts through the faults and
    a requeued run is not stuck behind thousands); the repeater submits again
    the keyed specs the first one hands it."""

    def __init__(self, conninfo: str, ledger: Ledger, *, admin: str = "",
                 faults_done: threading.Event | None = None,
                 repeats: queue.Queue[tuple[Spec, float] | None] | None = None) -> None:
        super().__init__(daemon=True, name="submitter" if faults_done else "repeater")
        self.conninfo, self.ledger, self.admin = conninfo, ledger, admin
        self.faults_done, self.repeats = faults_done, repeats
        self.error: BaseException | None = None
        self._client: Client | None = None

    def _connected(self) -> Client:
        while self._client is None:
            try:
                self._client = Client.connect(self.conninfo, connect_timeout=5).__enter__()
            except psycopg.OperationalError:
                time.sleep(0.1)  # the server is down: nothing was sent
        return self._client

    def _drop(self) -> None:
        if self._client is not None:
            with contextlib.suppress(psycopg.Error):
                self._client.close()
            self._client = None

    def submit(self, spec: Spec) -> tuple[int, str] | None:
        """The run and outcome; None when an unkeyed submit's fate is unknown."""
        for _ in range(200):
            client = self._connected()
            try:
                s = client.submit("tenant", "agent", spec.payload, session_id=spec.session,
                                  priority=spec.priority, idempotency_key=spec.key,
                                  max_attempts=MAX_ATTEMPTS, recovery_policy="resume")
                return s.run_id, s.outcome
            except psycopg.OperationalError:
                self._drop()
                if spec.key is None:
                    return None
                with self.ledger.lock:
                    self.ledger.retried += 1
                time.sleep(0.1)
        raise AssertionError(f"submit of {spec.token} kept failing")

    def run(self) -> None:
        try:
            if self.faults_done is not None:
                self._first_submits()
            else:
                self._repeat_submits()
        except BaseException as error:  # re-raised by the test
            self.error = error
        finally:
            self._drop()

    def _first_submits(self) -> None:
        assert self.faults_done is not None
        n = 0
        while n < RUNS or not self.faults_done.is_set():
            if n % 25 == 0:
                while query(self.admin, "SELECT count(*) FROM runq.runs"
                                        " WHERE status = 'queued'")[0][0] > BACKLOG:
                    time.sleep(0.05)
            spec = make_spec(n)
            n += 1
            got = self.submit(spec)
            with self.ledger.lock:
                self.ledger.specs.append(spec)
                if got is None:
                    self.ledger.unknown.add(spec.token)
                    continue
                self.ledger.acked[spec.token] = got[0]
                self.ledger.outcomes[got[1]] += 1
            if spec.key is not None and spec.n % 2 == 0 and self.repeats is not None:
                self.repeats.put((spec, time.monotonic()))
        if self.repeats is not None:
            self.repeats.put(None)

    def _repeat_submits(self) -> None:
        assert self.repeats is not None
        while (item := self.repeats.get()) is not None:
            spec, sent = item
            # shortly after the first: often while the run is queued or running
            time.sleep(max(0.0, sent + 0.05 - time.monotonic()))
            self.repeat(spec)

    def repeat(self, spec: Spec) -> None:
        got = self.submit(spec)
        assert got is not None  # keyed: never unknown
        with self.ledger.lock:
            self.ledger.repeats += 1
            if got != (self.ledger.acked[spec.token], "duplicate"):
                self.ledger.repeat_mismatch.append(
                    f"{spec.key}: first run {self.ledger.acked[spec.token]}, repeat got {got}")


# -- the test --------------------------------------------------------------------------------


@dataclass
class Faults:
    """What was done to the system, for the report."""

    log: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    stopped: list[tuple[int, int]] = field(default_factory=list)  # (run, stale epoch)
    began: float = field(default_factory=time.monotonic)

    def note(self, text: str) -> None:
        self.log.append(f"{time.monotonic() - self.began:6.1f}s  {text}")


def test_faults_under_load(workdir: Path, cluster: Cluster,
                           capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    admin, worker_url, client_url = deploy(cluster)
    server_port = int(str(conninfo_to_dict(admin)["port"]))
    ledger = Ledger()
    faults = Faults()
    workers: list[Worker] = []
    serial = iter(range(1000))
    report: list[str] = []

    def spawn(wait: bool = True) -> Worker:
        """A new worker process; with wait, once it is up (a SIGTERM before
        its handler is installed would kill it outright)."""
        w = Worker.spawn(f"w{next(serial)}", worker_url, workdir)
        workers.append(w)
        if wait:
            all_reconnected(f"starting {w.name}", [w], quiet=True)
        return w

    def live() -> list[Worker]:
        return [w for w in workers if not w.killed and w.proc.poll() is None]

    def busiest() -> Worker:
        """A live worker holding runs (waits for one)."""
        until = time.monotonic() + 30
        while time.monotonic() < until:
            for w in live():
                if w.held(admin):
                    return w
            time.sleep(0.05)
        raise AssertionError("no worker holds runs: the load is too light to inject faults")

    def all_reconnected(after: str, among: list[Worker] | None = None,
                        quiet: bool = False) -> None:
        """Every live worker has its full set of connections (again)."""
        until = time.monotonic() + RECONNECT_WITHIN
        while True:
            group = live() if among is None else among
            have = {w.name: w.connections(admin, server_port) for w in group}
            short = {k: v for k, v in have.items() if not Worker.full_set(v)}
            if not short:
                if not quiet:
                    faults.note(f"every live worker has all its connections after {after}")
                return
            if time.monotonic() > until:
                raise AssertionError(
                    f"after {after}, workers without their full set of connections "
                    f"(by application_name): {short}: a loop of the pool died or hung\n"
                    + "\n".join(w.tail() for w in group if w.name in short))
            time.sleep(0.25)

    def sigkill(replace: bool = True) -> None:
        victim = busiest()
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        victim.killed = True
        held = victim.held(admin)
        faults.counts["SIGKILL"] += 1
        faults.counts["runs held by killed workers"] += len(held)
        faults.note(f"SIGKILL {victim.name}, holding {len(held)} runs"
                    + (f"; {spawn().name} replaces it" if replace else ""))

    def sigstop() -> None:
        for _ in range(20):
            victim = busiest()
            victim.proc.send_signal(signal.SIGSTOP)
            t0 = time.monotonic()
            held = victim.held(admin)  # what it holds now that it is frozen
            if held:
                break
            victim.proc.send_signal(signal.SIGCONT)  # it finished them meanwhile
        else:
            raise AssertionError("no worker still held runs once stopped")
        ids, epochs = [r for r, _ in held], [e for _, e in held]
        moved_sql = ("SELECT count(*) FROM unnest(%s::bigint[], %s::bigint[]) AS u(r, e)"
                     " JOIN runq.runs AS x ON x.run_id = u.r WHERE x.lease_epoch > u.e")
        reclaimed, done, until = 0, 0, t0 + 30
        while time.monotonic() < until:  # swept, then claimed again by another worker
            reclaimed = query(admin, moved_sql, [ids, epochs])[0][0]
            done = query(admin, moved_sql + " OR x.status = ANY(%s)",
                         [ids, epochs, list(TERMINAL)])[0][0]
            if done == len(held) and time.monotonic() - t0 > LEASE:
                break
            time.sleep(0.1)
        victim.proc.send_signal(signal.SIGCONT)
        faults.stopped += held
        faults.counts["SIGSTOP"] += 1
        faults.counts["runs held by stopped workers"] += len(held)
        faults.counts["of those, claimed again while it was stopped"] += reclaimed
        # A write sent just before the stop may still have finished its run.
        faults.counts["of those, finished by a write sent before the stop"] += done - reclaimed
        faults.counts["of those, neither: the lease did not lapse"] += len(held) - done
        faults.note(f"SIGSTOP {victim.name} for {time.monotonic() - t0:.1f}s (lease {LEASE}s),"
                    f" holding {len(held)} runs, {reclaimed} claimed again meanwhile; SIGCONT")

    def terminate(which: str, names: tuple[str, ...]) -> None:
        n = query(admin, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                         " WHERE usename = 'fault_worker' AND application_name = ANY(%s)",
                  [list(names)])[0][0]
        faults.counts["backends terminated"] += n
        faults.note(f"pg_terminate_backend of {n} {which} connections")
        all_reconnected(f"pg_terminate_backend of {which} connections")

    def restart() -> None:
        running = query(admin, "SELECT count(*) FROM runq.runs WHERE status = 'running'")[0][0]
        took = cluster.restart_immediate()
        faults.counts["server restarts (-m immediate)"] += 1
        faults.note(f"pg_ctl restart -m immediate with {running} runs running"
                    f" ({took:.1f}s until accepting connections)")
        all_reconnected("the server restart")

    steps = iter(range(1, 6 * CYCLES + 1))

    def pace() -> None:
        """Spread the faults over the load: fault j of J waits for j/(J+1) of
        RUNS to be submitted (and at least GAP seconds)."""
        time.sleep(GAP)
        target = RUNS * next(steps) // (6 * CYCLES + 1)
        while len(ledger.specs) < target and submitter.is_alive():
            time.sleep(0.05)

    def cycle() -> None:
        pace()
        sigkill()
        pace()
        sigstop()
        pace()
        terminate("pool", ("runq-pool",))
        pace()
        restart()
        pace()
        terminate("heartbeat and LISTEN", ("runq-pool-heartbeat", "runq-pool-listen"))
        pace()
        sigkill()

    repeats: queue.Queue[tuple[Spec, float] | None] = queue.Queue()
    faults_done = threading.Event()
    submitter = Submitter(client_url, ledger, admin=admin, faults_done=faults_done,
                          repeats=repeats)
    repeater = Submitter(client_url, ledger, repeats=repeats)
    final: Worker | None = None
    left_for_final: dict[str, int] = {}
    try:
        for _ in range(WORKERS):
            spawn(wait=False)
        all_reconnected("starting", quiet=True)
        submitter.start()
        repeater.start()
        for _ in range(CYCLES):
            cycle()
        faults_done.set()
        faults.note(f"faults done; {len(ledger.specs)} runs submitted so far")
        submitter.join(timeout=DRAIN_WITHIN)
        assert not submitter.is_alive(), "the submitter hung"
        if submitter.error is not None:
            raise submitter.error
        faults.note(f"all {len(ledger.specs)} runs submitted")
        # Hand over mid-flight: one more SIGKILL, SIGTERM for the others (they
        # release what they hold), and a later pool finishes the rest.
        sigkill(replace=False)
        for w in live():
            w.proc.send_signal(signal.SIGTERM)
        for w in live():
            try:
                code = w.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{w.name} ignored SIGTERM\n{w.tail()}") from None
            assert code == 0, f"{w.name} exited {code}\n{w.tail()}"
        left_for_final = dict(query(admin, "SELECT status, count(*) FROM runq.runs"
                                           " WHERE status <> ALL(%s) GROUP BY status",
                                    [list(TERMINAL)]))
        faults.note(f"fault-phase workers stopped (SIGTERM); left for the final pool:"
                    f" {left_for_final or 'nothing'}")
        # A later, clean pool finishes what is still queued or running.
        final = Worker.spawn("final", worker_url, workdir, FINAL_SLOTS)
        all_reconnected("starting the final pool", [final], quiet=True)
        until = time.monotonic() + DRAIN_WITHIN
        while query(admin, "SELECT count(*) FROM runq.runs WHERE status <> ALL(%s)",
                    [list(TERMINAL)])[0][0] > 0:
            assert time.monotonic() < until, \
                f"runs still not terminal after {DRAIN_WITHIN}s of the final pool\n{final.tail()}"
            time.sleep(0.25)
        final.proc.send_signal(signal.SIGTERM)
        assert final.proc.wait(timeout=30) == 0, final.tail()
        repeater.join(timeout=60)
        assert not repeater.is_alive(), "the repeater hung"
        if repeater.error is not None:
            raise repeater.error
        faults.note("the final pool finished every run")
        # Keys once more, every run now terminal: still the same runs.
        again = Submitter(client_url, ledger)
        for spec in ledger.specs[::60]:
            if spec.key is not None and spec.token in ledger.acked:
                again.repeat(spec)
        again._drop()

        problems, counts = check(admin, ledger)
        stale = query(admin, "SELECT count(*) FROM unnest(%s::bigint[], %s::bigint[]) AS u(r, e)"
                             " JOIN runq.run_events AS x ON x.run_id = u.r AND x.epoch = u.e"
                             " AND x.type = 'run.fenced'",
                      [[r for r, _ in faults.stopped], [e for _, e in faults.stopped]])[0][0]
        faults.counts["runs whose stopped worker was fenced after SIGCONT"] += stale
        # Faults that did not bite would prove nothing.
        c = faults.counts
        bite = {"no killed worker held a run": c["runs held by killed workers"] > 0,
                "no run of a stopped worker was claimed again before SIGCONT":
                    c["of those, claimed again while it was stopped"] > 0,
                "a stopped worker kept a lease":
                    c["of those, neither: the lease did not lapse"] == 0,
                "no stale write of a stopped worker was fenced after SIGCONT": stale > 0,
                "no backend was terminated": c["backends terminated"] > 0}
        problems += [f"the faults did not bite: {k}" for k, ok in bite.items() if not ok]
        tracebacks = [w.tail(80) for w in [*workers, final]
                      if "Traceback" in w.log.read_text(errors="replace")]
        if tracebacks:
            problems.append("worker logs hold tracebacks:\n" + "\n".join(tracebacks))
        report = [*faults.log, *(f"{k}: {v}" for k, v in faults.counts.items()),
                  f"left for the final pool: {left_for_final or 'nothing'}", *counts,
                  f"runtime: {time.monotonic() - started:.1f}s"]
        assert not problems, "\n".join(problems)
    finally:
        for w in [*workers, *([final] if final else [])]:
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGCONT)
                w.proc.kill()
                w.proc.wait()
        with capsys.disabled():
            print("\n== faults under load ==\n" + "\n".join(report or faults.log))


# -- the checks -----------------------------------------------------------------------------


def check(admin: str, ledger: Ledger) -> tuple[list[str], list[str]]:
    """(problems, printed counts), all read from the tables."""
    problems: list[str] = []
    counts: list[str] = []
    with connect_retrying(admin) as c:

        def rows(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
            return c.execute(sql, params).fetchall()

        def expect_none(what: str, sql: str, params: Any = None) -> int:
            found = rows(sql, params)
            if found:
                problems.append(f"{what}: {len(found)}, e.g. {found[:5]}")
            counts.append(f"{what}: {len(found)}")
            return len(found)

        # -- accounted for --
        by_status = dict(rows("SELECT status, count(*) FROM runq.runs GROUP BY status"))
        codes = dict(rows("SELECT failure ->> 'code', count(*) FROM runq.runs"
                          " WHERE status = 'failed' GROUP BY 1"))
        total = sum(by_status.values())
        token_runs = rows("SELECT payload ->> 'token', array_agg(run_id ORDER BY run_id)"
                          " FROM runq.runs GROUP BY 1")
        runs_of = {t: ids for t, ids in token_runs}
        acked, specs = ledger.acked, ledger.specs
        unknown_found = sum(1 for t in ledger.unknown if t in runs_of)
        counts.append(
            f"submitted: {len(specs)} ({sum(1 for s in specs if s.key)} with an idempotency"
            f" key; {ledger.retried} keyed submits retried after a lost connection,"
            f" {len(ledger.unknown)} unkeyed ones lost with their connection, of which"
            f" {unknown_found} had created their run)")
        counts.append(f"acknowledged: {len(acked)} {dict(ledger.outcomes)}")
        counts.append(f"runs in the database: {total}, by status {by_status},"
                      f" failures by code {codes}")
        accounted = sum(by_status.get(s, 0) for s in TERMINAL)
        counts.append(f"accounted for (terminal): {accounted} of {total}, of which"
                      f" dead-lettered: {codes.get('max_attempts_exceeded', 0)}")
        if accounted != total:
            problems.append(f"runs not terminal after the final pool: {total - accounted}")
        lost = [t for t, r in acked.items() if runs_of.get(t) != [r]]
        lost += [t for t in ledger.unknown if len(runs_of.get(t, [])) > 1]
        if lost:
            problems.append(f"acknowledged submits without exactly their run: {lost[:5]}")
        counts.append(f"acknowledged submits that are not exactly one run: {len(lost)}")
        strays = [t for t in runs_of if t not in acked and t not in ledger.unknown]
        if strays or len(acked) + len(ledger.unknown) != len(specs):
            problems.append(f"runs nobody submitted, or submits never answered: {strays[:5]}")

        # -- terminal transitions --
        expect_none("runs with two or more terminal transitions", """
            SELECT run_id, array_agg(type ORDER BY event_id) FROM runq.run_events
             WHERE type IN ('run.succeeded', 'run.failed', 'run.cancelled')
             GROUP BY run_id HAVING count(*) > 1""")
        expect_none("terminal runs whose last transition does not match the status", """
            SELECT r.run_id, r.status, last.type
              FROM runq.runs AS r
              LEFT JOIN LATERAL (SELECT e.type FROM runq.run_events AS e
                                  WHERE e.run_id = r.run_id AND e.type <> 'run.fenced'
                                  ORDER BY e.event_id DESC LIMIT 1) AS last ON true
             WHERE last.type IS DISTINCT FROM 'run.' || r.status""")

        # -- stale epochs --
        # Event order is exact: every applied worker write locks the run's row
        # and logs in its own transaction, so a write of epoch N that got
        # through after the claim of N + 1 logs after it. The row checks
        # compare clock times: a row of epoch N is stamped before its
        # transaction commits, the sweep that requeues the run can only lock
        # it after that, and the claim of N + 1 comes at least backoff_base
        # after the sweep's own clock reading (release does not back off, but
        # its worker's own writes are over by then).
        expect_none("events of an epoch other than the last claim's (run.fenced aside)", """
            SELECT run_id, event_id, type, epoch, claimed
              FROM (SELECT e.*, coalesce(max(e.epoch) FILTER (WHERE e.type = 'run.claimed')
                                         OVER (PARTITION BY e.run_id ORDER BY e.event_id), 0)
                                AS claimed
                      FROM runq.run_events AS e) AS x
             WHERE type <> 'run.fenced' AND epoch <> claimed""")
        expect_none("checkpoint rows of an epoch written after the run was claimed again", """
            SELECT k.run_id, k.seq, k.epoch
              FROM runq.checkpoints AS k
              JOIN runq.run_events AS e ON e.run_id = k.run_id AND e.type = 'run.claimed'
                                       AND e.epoch > k.epoch AND e.created_at <= k.created_at""")
        expect_none("tool_calls rows of an epoch written after the run was claimed again", """
            SELECT t.run_id, t.call_id, t.epoch, t.status
              FROM runq.tool_calls AS t
              JOIN runq.run_events AS e ON e.run_id = t.run_id AND e.type = 'run.claimed'
                                       AND e.epoch > t.epoch
                                       AND e.created_at <= greatest(t.started_at, t.finished_at)""")
        expect_none("checkpoint rows without their run.checkpointed event of that epoch", """
            SELECT k.run_id, k.seq, k.epoch FROM runq.checkpoints AS k
             WHERE NOT EXISTS (SELECT FROM runq.run_events AS e
                                WHERE e.run_id = k.run_id AND e.type = 'run.checkpointed'
                                  AND e.epoch = k.epoch
                                  AND (e.payload ->> 'seq')::bigint = k.seq)""")
        expect_none("tool_calls rows disagreeing with their last tool event", """
            SELECT t.run_id, t.call_id, t.epoch, t.status, s.epoch, f.epoch
              FROM runq.tool_calls AS t
              LEFT JOIN LATERAL (SELECT e.epoch, e.event_id FROM runq.run_events AS e
                                  WHERE e.run_id = t.run_id AND e.type = 'run.tool_started'
                                    AND e.payload ->> 'call_id' = t.call_id
                                  ORDER BY e.event_id DESC LIMIT 1) AS s ON true
              LEFT JOIN LATERAL (SELECT e.epoch FROM runq.run_events AS e
                                  WHERE e.run_id = t.run_id AND e.type = 'run.tool_finished'
                                    AND e.payload ->> 'call_id' = t.call_id
                                    AND e.event_id > s.event_id) AS f ON true
             WHERE s.epoch IS DISTINCT FROM t.epoch
                OR (t.status = 'finished') <> (f.epoch IS NOT NULL)
                OR f.epoch <> t.epoch""")
        expect_none("succeeded runs not completed by their last epoch", """
            SELECT r.run_id, r.lease_epoch, r.result ->> 'epoch'
              FROM runq.runs AS r
             WHERE r.status = 'succeeded'
               AND (r.result ->> 'epoch')::bigint IS DISTINCT FROM r.lease_epoch""")
        expect_none("run.fenced events repeated for one run and epoch", """
            SELECT run_id, epoch, count(*) FROM runq.run_events WHERE type = 'run.fenced'
             GROUP BY run_id, epoch HAVING count(*) > 1""")
        events = dict(rows("SELECT type, count(*) FROM runq.run_events GROUP BY type"))
        counts.append(f"events: {sum(events.values())} {dict(sorted(events.items()))}")
        counts.append("requeues by reason: " + str(dict(rows(
            "SELECT payload ->> 'reason', count(*) FROM runq.run_events"
            " WHERE type = 'run.requeued' GROUP BY 1"))))
        claims = rows("SELECT count(*) FILTER (WHERE lease_epoch > 1), max(lease_epoch),"
                      " max(attempts) FROM runq.runs")[0]
        counts.append(f"runs claimed more than once: {claims[0]} (highest epoch {claims[1]},"
                      f" most attempts {claims[2]})")
        tools = dict(rows("SELECT status, count(*) FROM runq.tool_calls GROUP BY status"))
        resumed = rows("""
            SELECT count(*) FILTER (WHERE jsonb_array_length(result -> 'retried') > 0),
                   count(*) FILTER (WHERE jsonb_array_length(result -> 'unknown') > 0)
              FROM runq.runs WHERE status = 'succeeded'""")[0]
        counts.append(f"tool calls by status: {tools}; succeeded runs that re-ran a"
                      f" retryable call: {resumed[0]}, that reported an uncertain one as"
                      f" unknown: {resumed[1]}")

        # -- idempotency --
        keyed = [s for s in specs if s.key is not None]
        keys = rows("SELECT idempotency_key, run_id FROM runq.idempotency_keys")
        key_runs = dict(keys)
        expect_none("idempotency keys mapping to two runs (or to none)", """
            SELECT k.idempotency_key, array_agg(r.run_id)
              FROM runq.idempotency_keys AS k
              LEFT JOIN runq.runs AS r
                     ON r.payload ->> 'token' = 't' || substr(k.idempotency_key, 5)
             GROUP BY k.idempotency_key
            HAVING count(r.run_id) <> 1 OR bool_or(r.run_id IS DISTINCT FROM k.run_id)""")
        wrong_key = [s.key for s in keyed if s.token in acked
                     and key_runs.get(s.key) != acked[s.token]]
        if wrong_key:
            problems.append(f"keys not mapping to the acknowledged run: {wrong_key[:5]}")
        if ledger.repeat_mismatch:
            problems.append(f"repeated keyed submits not answered with the original run as a"
                            f" duplicate: {ledger.repeat_mismatch[:5]}")
        counts.append(f"idempotency keys: {len(keys)}; repeated submits {ledger.repeats},"
                      f" answered with another run or not as duplicate:"
                      f" {len(ledger.repeat_mismatch)}")
    return problems, counts
