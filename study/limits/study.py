#!/usr/bin/env python3
"""Measures the cost of candidate primitives for per-tenant concurrency limits.

    study.py setup             create the study database, sqitch deploy, prototypes.sql
    study.py cycles            claim+complete cycles/s per candidate, 1/4/16 clients
    study.py held              the same, while another session holds a snapshot
    study.py hol               head-of-line: a claim behind 1M runs of a saturated tenant
    study.py hol-pairs         more repetitions of its (c) empty and (b) parked cases
    study.py report            results.jsonl -> tables (markdown) on stdout
    study.py drop              drop the study database

The server: scripts/pg server (RUNQ_DATABASE_URL when set, which is how the
shared server was given for the figures in RESULTS.md).

Everything is measured with pgbench against a database of its own on the
shared server (scripts/pg server). Repetitions are interleaved (every
candidate once, then again) and medians reported. Before each measurement it
waits (polling every 30 s) until no CI run loads the machine. Raw figures are
appended to results.jsonl beside this file.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DB = "limits_study"
RESULTS = HERE / "results.jsonl"
PGBIN = Path(subprocess.run([str(ROOT / "scripts/pg"), "bin"], check=True,
                            capture_output=True, text=True).stdout.strip())
ADMIN = subprocess.run([str(ROOT / "scripts/pg"), "server"], check=True,
                       capture_output=True, text=True).stdout.strip()
URL = urlunsplit(urlsplit(ADMIN)._replace(path="/" + DB))
CLIENTS = (1, 4, 16)

# name: (pgbench script, tenants, setup SQL run after the load)
RUNNING_IDX = ("CREATE INDEX runs_running_tenant_idx ON runq.runs (tenant_id)"
               " WHERE status = 'running'")
PARKED_IDX = ("CREATE INDEX runs_parked_idx ON runq.runs (tenant_id, priority, run_id)"
              " WHERE ready_at = 'infinity'")
TRIGGER = ("CREATE TRIGGER runs_probe_parked AFTER UPDATE OF status ON runq.runs FOR EACH ROW"
           " WHEN (OLD.status = 'running' AND NEW.status <> 'running')"
           " EXECUTE FUNCTION study.probe_parked()")
VARIANTS: dict[str, tuple[str, int, list[str]]] = {
    "0 baseline": ("cycle_base.pgbench", 1, []),
    "0w wrapper only": ("cycle_wrap.pgbench", 1, []),
    "1 count, 1 tenant": ("cycle_count.pgbench", 1, [RUNNING_IDX]),
    "1 count, 100 tenants": ("cycle_count.pgbench", 100, [RUNNING_IDX]),
    "2 counter, 1 tenant": ("cycle_counter.pgbench", 1, []),
    "2 counter, 100 tenants": ("cycle_counter.pgbench", 100, []),
    "3a trigger probe": ("cycle_base.pgbench", 1, [PARKED_IDX, TRIGGER]),
    "3b inline probe": ("cycle_probe.pgbench", 1, [PARKED_IDX]),
}


def psql(sql: str, url: str = URL) -> str:
    return subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                           url, "-c", sql], check=True, capture_output=True,
                          text=True).stdout.strip()


def psql_file(path: str) -> None:
    subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", URL, "-f", path],
                   check=True, capture_output=True, text=True)


def record(**fields: object) -> None:
    fields["at"] = time.strftime("%H:%M:%S")
    # Others on the shared server, and the machine's load, as the record ends.
    fields["others_active"] = int(psql(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
        f" AND datname IS DISTINCT FROM '{DB}' AND pid <> pg_backend_pid()"))
    fields["load1"] = os.getloadavg()[0]
    print(json.dumps(fields), flush=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(fields) + "\n")


def wait_quiet() -> None:
    """Until no CI run is loading the machine."""
    while subprocess.run(["pgrep", "-f", "ci/run"], capture_output=True).returncode == 0:
        print("CI running; waiting 30 s", flush=True)
        time.sleep(30)


def pgbench(script: str, clients: int, *, seconds: int | None = None,
            transactions: int | None = None, log: bool = False) -> tuple[float, list[float]]:
    args = [str(PGBIN / "pgbench"), "-n", "-M", "prepared", "-c", str(clients),
            "-j", str(min(clients, 4)), "-f", str(HERE / script)]
    args += ["-T", str(seconds)] if seconds else ["-t", str(transactions)]
    with tempfile.TemporaryDirectory() as d:
        if log:
            args += ["-l", "--log-prefix", os.path.join(d, "tx")]
        out = subprocess.run([*args, URL], capture_output=True, text=True, check=False)
        if out.returncode != 0 or "aborted" in out.stdout:
            sys.exit(f"pgbench {script} failed:\n{out.stdout}\n{out.stderr}")
        tps = float(re.search(r"tps = ([\d.]+)", out.stdout).group(1))  # type: ignore[union-attr]
        lat = [int(line.split()[2]) / 1000 for f in Path(d).glob("tx*")
               for line in f.read_text().splitlines()]
    return tps, lat


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p / 100))]


def reset() -> None:
    psql("DROP TRIGGER IF EXISTS runs_probe_parked ON runq.runs;"
         " DROP INDEX IF EXISTS runq.runs_running_tenant_idx, runq.runs_parked_idx;"
         " TRUNCATE runq.runs, runq.run_events, runq.checkpoints, runq.inputs,"
         " runq.tool_calls, runq.idempotency_keys, study.key_counts RESTART IDENTITY CASCADE")
    psql("VACUUM ANALYZE runq.runs, runq.run_events, study.key_counts")


def load(n: int, tenants: int, *, tenant: str | None = None) -> None:
    who = (f"'{tenant}'" if tenant else "'bench'" if tenants == 1
           else f"'t' || (g % {tenants})")
    psql("INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)"
         f" SELECT clock_timestamp(), now(), 10, {who}, 'bench.cycle'"
         f" FROM generate_series(1, {n}) AS g")


def prepare(variant: str, supply: int) -> str:
    script, tenants, setup = VARIANTS[variant]
    reset()
    load(supply, tenants)
    for sql in setup:
        psql(sql)
    if "counter" in variant:
        # max_running far above any count reached: the limit is never hit.
        psql("INSERT INTO study.key_counts (scope, key, max_running)"
             " SELECT DISTINCT 'tenant', tenant_id, 1000 FROM runq.runs")
    psql("VACUUM ANALYZE runq.runs, study.key_counts")
    psql("CHECKPOINT")
    return script


def check(variant: str) -> None:
    """The counters agree with the runs (what the primitive is for)."""
    if "counter" in variant:
        bad = psql("SELECT count(*) FROM study.key_counts AS k WHERE k.running <>"
                   " (SELECT count(*) FROM runq.runs AS r"
                   "   WHERE r.tenant_id = k.key AND r.status = 'running')")
        if bad != "0":
            sys.exit(f"{variant}: {bad} counters disagree with the runs")


def cycles(reps: int, seconds: int, variants: list[str], first_rep: int = 0) -> None:
    for rep in range(first_rep, first_rep + reps):
        for clients in CLIENTS:
            for v in variants:
                wait_quiet()
                script = prepare(v, 8000 * seconds)
                tps, _ = pgbench(script, clients, seconds=seconds)
                check(v)
                record(part="cycles", variant=v, clients=clients, rep=rep, seconds=seconds,
                       tps=tps)


class Holder:
    """Another session holding a REPEATABLE READ snapshot (as the design question
    gives it: pg_sleep(70)), cancelled by its own backend pid once done."""

    def __init__(self) -> None:
        self.name = f"limits-study-holder-{os.getpid()}"
        env = {**os.environ, "PGAPPNAME": self.name}
        self.proc = subprocess.Popen(
            [str(PGBIN / "psql"), "-X", "-q", URL, "-c",
             "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; SELECT pg_sleep(70); COMMIT;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for _ in range(100):
            self.pid = psql("SELECT pid FROM pg_stat_activity WHERE application_name ="
                            f" '{self.name}' AND backend_xmin IS NOT NULL"
                            " AND query LIKE '%pg_sleep%' AND state = 'active'")
            if self.pid:
                break
            time.sleep(0.1)
        else:
            sys.exit("the snapshot holder did not start")
        self.started = time.monotonic()

    def held_for(self) -> float:
        return time.monotonic() - self.started

    def end(self) -> None:
        psql(f"SELECT pg_cancel_backend({int(self.pid)})")
        self.proc.wait()


def held(reps: int, seconds: int, variants: list[str]) -> None:
    """Per variant, one snapshot held while 1, then 4, then 16 clients run
    `seconds` each, one after the other (so 16 clients run last, under the
    most dead rows)."""
    for rep in range(reps):
        for v in variants:
            wait_quiet()
            script = prepare(v, 8000 * 3 * seconds)
            h = Holder()
            for clients in CLIENTS:
                t0 = h.held_for()
                tps, _ = pgbench(script, clients, seconds=seconds)
                record(part="held", variant=v, clients=clients, rep=rep, seconds=seconds,
                       tps=tps, held_from=round(t0, 1), held_to=round(h.held_for(), 1))
            sizes = psql("SELECT string_agg(c.relname || '=' || pg_relation_size(c.oid), ' ')"
                         " FROM pg_class AS c WHERE c.relname IN"
                         " ('runs_running_tenant_idx', 'key_counts', 'key_counts_pkey',"
                         "  'runs_ready_idx', 'runs_parked_idx')")
            h.end()
            check(v)
            record(part="held-sizes", variant=v, rep=rep, sizes=sizes)


def wal_lsn() -> str:
    return psql("SELECT pg_current_wal_lsn()")


def timed_sql(label: str, sqls: list[str], rep: int) -> None:
    """Runs the statements (each its own transaction, one session), and
    records the time and the WAL written."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as f:
        f.write("\n".join(sqls) + "\n")
        f.flush()
        psql("CHECKPOINT")
        lsn0 = wal_lsn()
        t0 = time.monotonic()
        psql_file(f.name)
        secs = time.monotonic() - t0
        wal = int(float(psql(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn0}')")))
    record(part="park", what=label, rep=rep, seconds=round(secs, 2), wal_bytes=wal)


PARK_ALL = ("UPDATE runq.runs SET scheduled_for = 'infinity', updated_at = now()"
            " WHERE tenant_id = 'A' AND status = 'queued' AND ready_at < 'infinity';")
UNPARK_ALL = ("UPDATE runq.runs SET scheduled_for = NULL, updated_at = now()"
              " WHERE tenant_id = 'A' AND status = 'queued' AND ready_at = 'infinity';")
PARK_BATCH = ("UPDATE runq.runs SET scheduled_for = 'infinity', updated_at = now()"
              " WHERE run_id = ANY (ARRAY(SELECT r.run_id FROM runq.runs AS r"
              "  WHERE r.status = 'queued' AND r.priority = 10 AND r.ready_at < 'infinity'"
              "    AND r.tenant_id = 'A' ORDER BY r.priority, r.ready_at, r.run_id"
              "  LIMIT 10000));")
UNPARK_BATCH = ("UPDATE runq.runs SET scheduled_for = NULL, updated_at = now()"
                " WHERE run_id = ANY (ARRAY(SELECT r.run_id FROM runq.runs AS r"
                "  WHERE r.tenant_id = 'A' AND r.ready_at = 'infinity' AND r.status = 'queued'"
                "  ORDER BY r.tenant_id, r.priority, r.run_id LIMIT 10000));")


def hol(reps: int, backlog: int, claims: int, slow_claims: int, pairs: bool = False,
        first_rep: int = 0) -> None:
    """Claims of tenant B's runs, queued after `backlog` runs of tenant A in
    the same class: (c) the empty queue (B's runs only), (a) A's runs in the
    ready index and a filter tenant_id <> 'A', (b) A's runs parked
    (ready_at = 'infinity'); each also under a held snapshot; and what
    parking and unparking A's backlog costs."""
    batches = backlog // 10_000 + 1

    def fill(with_a: bool, b_runs: int) -> None:
        reset()
        if with_a:
            load(backlog, 1, tenant="A")
        load(b_runs, 1, tenant="B")
        psql(PARKED_IDX)
        psql("VACUUM ANALYZE runq.runs")
        psql("CHECKPOINT")

    def latency(case: str, script: str, n: int, rep: int, holder: Holder | None) -> None:
        _, lat = pgbench(script, 1, transactions=n, log=True)
        ok = psql("SELECT count(*) FROM runq.runs WHERE status = 'running' AND tenant_id = 'B'")
        if int(ok) != n:
            sys.exit(f"{case}: {ok} of B's runs claimed, not {n}")
        record(part="hol", case=case, rep=rep, claims=n, backlog=backlog,
               held=holder is not None,
               p50_ms=round(pct(lat, 50), 3), p99_ms=round(pct(lat, 99), 3),
               max_ms=round(max(lat), 3))

    if pairs:
        # More interleaved repetitions of (c) and (b) alone, no snapshot held.
        for rep in range(first_rep, first_rep + reps):
            wait_quiet()
            fill(False, claims)
            latency("c empty queue", "claim_only.pgbench", claims, rep, None)
            fill(True, claims)
            psql(PARK_ALL)
            psql("VACUUM ANALYZE runq.runs")
            psql("CHECKPOINT")
            latency("b A parked", "claim_only.pgbench", claims, rep, None)
        return

    for rep in range(reps):
        wait_quiet()
        fill(False, claims)
        latency("c empty queue", "claim_only.pgbench", claims, rep, None)
        fill(False, claims)
        h = Holder()
        latency("c empty queue", "claim_only.pgbench", claims, rep, h)
        h.end()

        wait_quiet()
        fill(True, slow_claims)
        latency("a filter, A in the ready index", "claim_skip.pgbench", slow_claims, rep, None)

        wait_quiet()
        fill(True, claims)
        timed_sql(f"park {backlog:,}, one UPDATE", [PARK_ALL], rep)
        psql("VACUUM ANALYZE runq.runs")
        psql("CHECKPOINT")
        latency("b A parked", "claim_only.pgbench", claims, rep, None)
        timed_sql(f"unpark {backlog:,}, one UPDATE", [UNPARK_ALL], rep)
        psql("VACUUM ANALYZE runq.runs")
        timed_sql(f"park {backlog:,}, batches of 10,000", [PARK_BATCH] * batches, rep)
        psql("VACUUM ANALYZE runq.runs")
        timed_sql(f"unpark {backlog:,}, batches of 10,000", [UNPARK_BATCH] * batches, rep)

        wait_quiet()
        fill(True, claims)
        psql(PARK_ALL)
        psql("VACUUM ANALYZE runq.runs")
        psql("CHECKPOINT")
        h = Holder()
        latency("b A parked (before the snapshot)", "claim_only.pgbench", claims, rep, h)
        h.end()

        # Parking while a snapshot is held: the old entries of A's runs stay in
        # the ready index, in front of B, until the snapshot ends.
        wait_quiet()
        fill(True, slow_claims)
        h = Holder()
        psql(PARK_ALL)
        latency("b A parked (during the snapshot)", "claim_only.pgbench", slow_claims, rep, h)
        h.end()


def report() -> None:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    for part in ("cycles", "held"):
        got: dict[tuple[str, int, int], float] = {}
        for r in rows:
            if r["part"] == part:
                got[(r["variant"], r["clients"], r["rep"])] = r["tps"]
        if not got:
            continue
        reps = sorted({rep for _, _, rep in got})
        print(f"\n### {part}: claim+complete cycles/s\n")
        print("Rates: medians over the repetitions. Ratios: the median of the per-repetition"
              " ratios to the baseline measured in the same repetition, [lowest-highest].\n")
        print("| candidate | " + " | ".join(f"{c} client{'s' * (c > 1)}" for c in CLIENTS)
              + " | " + " | ".join(f"/ baseline at {c}" for c in CLIENTS) + " | reps |")
        print("|---|" + "---:|" * (2 * len(CLIENTS) + 1))
        for v in VARIANTS:
            if (v, 1, reps[0]) not in got:
                continue
            cells = []
            for c in CLIENTS:
                cells.append(f"{statistics.median(got[(v, c, rep)] for rep in reps):,.0f}")
            for c in CLIENTS:
                ratios = [got[(v, c, rep)] / got[("0 baseline", c, rep)] for rep in reps]
                cells.append(f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]")
            print(f"| {v} | " + " | ".join(cells) + f" | {len(reps)} |")
    hol_rows: dict[tuple[str, bool], list[dict]] = {}
    for r in rows:
        if r["part"] == "hol":
            hol_rows.setdefault((r["case"], r["held"]), []).append(r)
    if hol_rows:
        print("\n### head-of-line: one claim at a time (1 client), median of reps\n")
        print("| case | snapshot held | claims | p50 (ms) | p99 (ms) | max (ms) | reps |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for (case, h), rs in hol_rows.items():
            med = {k: statistics.median(r[k] for r in rs) for k in ("p50_ms", "p99_ms", "max_ms")}
            print(f"| {case} | {'yes' if h else 'no'} | {rs[0]['claims']:,} | {med['p50_ms']:.3f}"
                  f" | {med['p99_ms']:.3f} | {med['max_ms']:.3f} | {len(rs)} |")
    park: dict[str, list[dict]] = {}
    for r in rows:
        if r["part"] == "park":
            park.setdefault(r["what"], []).append(r)
    if park:
        print("\n### parking tenant A's queued runs, median of reps\n")
        print("| operation | seconds | WAL (MB) | reps |")
        print("|---|---:|---:|---:|")
        for what, rs in park.items():
            print(f"| {what} | {statistics.median(r['seconds'] for r in rs):.1f}"
                  f" | {statistics.median(r['wal_bytes'] for r in rs) / 1e6:,.0f} | {len(rs)} |")
    sizes = [r for r in rows if r["part"] == "held-sizes"]
    if sizes:
        print("\n### relation sizes at the end of each held snapshot (bytes)\n")
        for r in sizes:
            print(f"- {r['variant']} (rep {r['rep']}): {r['sizes']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("setup", "cycles", "held", "hol", "hol-pairs", "report", "drop"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--first-rep", type=int, default=0, help="label of the first repetition")
    ap.add_argument("--variants", help="comma-separated prefixes (default: all)")
    ap.add_argument("--backlog", type=int, default=1_000_000)
    ap.add_argument("--claims", type=int, default=5000)
    ap.add_argument("--slow-claims", type=int, default=20)
    o = ap.parse_args()
    variants = [v for v in VARIANTS if not o.variants
                or any(v.startswith(p) for p in o.variants.split(","))]
    if o.what == "setup":
        psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", ADMIN)
        psql(f"CREATE DATABASE {DB}", ADMIN)
        subprocess.run(["sqitch", "--quiet", "deploy", f"db:{URL}"], cwd=ROOT, check=True)
        psql_file(str(HERE / "prototypes.sql"))
    elif o.what == "cycles":
        cycles(o.reps, o.seconds, variants, o.first_rep)
    elif o.what == "held":
        held(o.reps, o.seconds, variants)
    elif o.what == "hol":
        hol(o.reps, o.backlog, o.claims, o.slow_claims)
    elif o.what == "hol-pairs":
        hol(o.reps, o.backlog, o.claims, o.slow_claims, pairs=True, first_rep=o.first_rep)
    elif o.what == "report":
        report()
    else:
        psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", ADMIN)


if __name__ == "__main__":
    main()
