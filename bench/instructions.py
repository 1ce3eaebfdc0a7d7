#!/usr/bin/env python3
"""Instructions the server executes per claim + complete cycle and per
heartbeat, for runq and for the floor, for before/after.

    bench/instructions.py                    runq in the working tree, and the floor
    bench/instructions.py --rev 832e655      ... and runq as committed there
    bench/instructions.py --kinds            ... also a claim that names its kind
    bench/instructions.py --one-call         ... also complete_and_claim, one call a cycle

bench/cpu.py reads a backend's CPU time, which a shared or loaded machine
moves by 10 % and more. This counts instructions instead, with valgrind's
callgrind, which gives the same count for the same binary and input whatever
else the machine does. For each schema: a private cluster (initdb in a temp
directory, as the postgres OS user when run as root) gets a database with that
schema and 5,000 queued runs; then `postgres --single` under callgrind runs a
prepared statement 100 times, and again 100 + --cycles times on a fresh copy
of that database; the difference over --cycles is the count per cycle (or
heartbeat), free of start-up. One statement per cycle (single-user mode has
no pgbench), prepared as a worker's driver would.

The floor (bench/references.sql) is the minimal queue behind SECURITY DEFINER
functions with fencing and one event per transition: the least the contract
lets a call cost. Every count is also given as a ratio to the floor's count of
the same call, measured in the same run. Needs valgrind.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cpu import schema_sql  # bench/cpu.py, beside this file
from run import PGBIN

HERE = Path(__file__).resolve().parent
SUPPLY = 5000
FLOOR_DB = "floor"
RUNQ_SUPPLY = ("INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind)"
               " SELECT clock_timestamp(), now(), 10, 'bench', 'bench.cycle'"
               f" FROM generate_series(1, {SUPPLY})", "VACUUM ANALYZE runq.runs")
FLOOR_SUPPLY = (f"INSERT INTO bench_floor (state) SELECT 0 FROM generate_series(1, {SUPPLY})",
                "VACUUM ANALYZE bench_floor")


@dataclass(frozen=True)
class Call:
    """What is counted: a setup run in both counts ({runs} in it: the
    calls of the longer count), then the statement of call i (1, 2, ...),
    whose output line `answer = "t"` says it worked."""

    label: str
    setup: str
    statement: str  # formatted with i
    answer: str


def cycle(claim: str) -> Call:
    return Call("claim + complete" if "kinds" not in claim else "claim (kinds given) + complete",
                "PREPARE cycle AS SELECT runq.complete(c.run_id, c.epoch) AS done"
                f" FROM {claim} AS c;\n",
                "EXECUTE cycle;\n", "done")


# One call a cycle: each completes the run the one before claimed, handed on
# through a temporary table (single-user mode has no client variables).
ONE_CALL = Call(
    "complete_and_claim (and the table that hands the run on)",
    "CREATE TEMP TABLE held (run_id bigint, epoch bigint);\n"
    "INSERT INTO held SELECT run_id, epoch FROM runq.claim(ARRAY[10], 'bench');\n"
    "PREPARE cycle AS WITH next AS (SELECT c.run_id, c.epoch FROM held AS h,"
    " runq.complete_and_claim(h.run_id, h.epoch, NULL, ARRAY[10], 'bench') AS c),"
    " gone AS (DELETE FROM held) INSERT INTO held SELECT * FROM next;\n",
    "EXECUTE cycle;\n", "")

# A heartbeat of a different running run each time, as a worker holding many
# runs sends them; before them, in both counts alike, as many runs claimed
# (epoch 1) as the longer count makes calls ({runs}: a claim under callgrind
# is slow, and one of all 5,000 took minutes).
HEARTBEAT = Call(
    "heartbeat",
    "SELECT count(*) FROM runq.claim(ARRAY[10], 'bench', interval '1 hour', {runs});\n"
    "PREPARE beat(bigint) AS SELECT runq.heartbeat($1, 1) AS alive;\n",
    "EXECUTE beat({i});\n", "alive")

FLOOR_CYCLE = Call(
    "claim + complete",
    "PREPARE cycle AS SELECT bench_floor_complete(c.run_id, c.epoch) AS done"
    " FROM bench_floor_claim() AS c;\n",
    "EXECUTE cycle;\n", "done")

FLOOR_HEARTBEAT = Call(
    "heartbeat",
    "SELECT count(bench_floor_claim()) FROM generate_series(1, {runs});\n"
    "PREPARE beat(bigint) AS SELECT bench_floor_heartbeat($1, 1) AS alive;\n",
    "EXECUTE beat({i});\n", "alive")


def as_owner(args: list[str], stdin: IO[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run args as the postgres OS user when root (initdb and postgres refuse root)."""
    if os.getuid() == 0:
        args = ["runuser", "-u", "postgres", "--", *args]
    return subprocess.run(args, check=True, text=True, stdin=stdin, capture_output=True)


def build(data: Path, sock: Path, schemas: dict[str, tuple[str, tuple[str, str]]]) -> None:
    """One database per name, with its schema and SUPPLY queued runs, then stop."""
    as_owner([str(PGBIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
              "--encoding=UTF8", "--locale=C.UTF-8"])
    as_owner([str(PGBIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(data / "log"), "start",
              "-o", f"-c listen_addresses= -k {sock} -p 55432"])
    try:
        psql = [str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(sock),
                "-p", "55432", "-U", "postgres"]
        for name, (schema, supply) in schemas.items():
            subprocess.run([*psql, "-d", "postgres", "-c", f"CREATE DATABASE {name}"],
                           check=True, capture_output=True)
            subprocess.run([*psql, "-d", name, "-f", "-"], input=schema, check=True,
                           capture_output=True, text=True)
            subprocess.run([*psql, "-d", name, "-c", supply[0], "-c", supply[1]], check=True,
                           capture_output=True)
    finally:
        as_owner([str(PGBIN / "pg_ctl"), "-D", str(data), "-w", "stop"])


def instructions(data: Path, db: str, calls: int, call: Call, work: Path, runs: int) -> int:
    script = work / f"calls_{db}_{calls}.sql"
    check = "" if call.answer else (
        "SELECT count(*) AS done FROM runq.runs WHERE status = 'succeeded';\n")
    script.write_text(call.setup.replace("{runs}", str(runs))
                      + "".join(call.statement.format(i=i + 1) for i in range(calls))
                      + check)
    out = work / f"callgrind.{db}.{calls}"
    with script.open() as stdin:
        done = as_owner(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                         str(PGBIN / "postgres"), "--single", "-D", str(data), db],
                        stdin=stdin)
    worked = (done.stdout.count(f'{call.answer} = "t"') == calls if call.answer
              else f'done = "{calls}"' in done.stdout)
    if not worked:
        sys.exit(f"{db}: not every {call.label} worked:\n{done.stdout[-2000:]}")
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    sys.exit(f"no totals in {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", action="append", default=[],
                    help="also measure runq as committed at this git revision (repeatable)")
    ap.add_argument("--kinds", action="store_true", help="also a claim with kinds")
    ap.add_argument("--one-call", action="store_true",
                    help="also complete_and_claim, one call a cycle")
    ap.add_argument("--cycles", type=int, default=1000,
                    help="calls counted (after 100); at most 4,900")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("bench/instructions.py needs valgrind (apt-get install valgrind)")
    if not 0 < args.cycles <= SUPPLY - 100:
        sys.exit(f"--cycles must be in 1..{SUPPLY - 100}: each call takes a run of its own")

    labels = {"runq_tree": "runq (working tree)", FLOOR_DB: "floor"}
    schemas = {"runq_tree": (schema_sql(None), RUNQ_SUPPLY),
               FLOOR_DB: ((HERE / "references.sql").read_text(), FLOOR_SUPPLY)}
    for n, rev in enumerate(args.rev):
        labels[f"runq_rev{n}"] = f"runq at {rev}"
        schemas[f"runq_rev{n}"] = (schema_sql(rev), RUNQ_SUPPLY)
    runqs = [db for db in schemas if db != FLOOR_DB]
    # (what is counted, the databases it is counted in)
    plan: list[tuple[Call, list[str]]] = [(FLOOR_CYCLE, [FLOOR_DB]),
                                          (cycle("runq.claim(ARRAY[10], 'bench')"), runqs)]
    if args.kinds:  # an older claim may have no kinds argument: the tree only
        plan.append((cycle("runq.claim(ARRAY[10], 'bench', kinds => ARRAY['bench.cycle'])"),
                     ["runq_tree"]))
    if args.one_call:
        plan.append((ONE_CALL, runqs))
    plan += [(FLOOR_HEARTBEAT, [FLOOR_DB]), (HEARTBEAT, runqs)]

    work = Path(tempfile.mkdtemp(prefix="runq-instr-"))
    os.chmod(work, 0o777)
    try:
        built = work / "built"
        build(built, work, schemas)
        rows: list[tuple[str, str, int]] = []  # (queue, call, instructions in all)
        for call, dbs in plan:
            counts = dict.fromkeys(dbs, 0)
            for calls in (100, 100 + args.cycles):
                # A fresh copy of the databases for each count: the second
                # would otherwise start where the first left its queue.
                data = work / "data"
                as_owner(["cp", "-a", str(built), str(data)])
                for db in dbs:
                    counts[db] = (instructions(data, db, calls, call, work, 100 + args.cycles)
                                  - counts[db])
                as_owner(["rm", "-rf", str(data)])
            rows += [(labels[db], call.label, c) for db, c in counts.items()]
        floor = {label: c for queue, label, c in rows if queue == "floor"}
        print("Instructions per call (callgrind, postgres --single, prepared,"
              f" {args.cycles:,} calls counted)\n")
        print("| queue | call | instructions per call | / the floor's |")
        print("| --- | --- | ---: | ---: |")
        for queue, label, c in rows:
            base = floor["heartbeat" if label == "heartbeat" else "claim + complete"]
            print(f"| {queue} | {label} | {c / args.cycles:,.0f} | {c / base:.3f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
