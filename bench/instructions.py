#!/usr/bin/env python3
"""Instructions the server executes per claim + complete cycle, for before/after.

    bench/instructions.py                    runq in the working tree
    bench/instructions.py --rev 832e655      ... and runq as committed there
    bench/instructions.py --kinds            ... also a claim that names its kind
    bench/instructions.py --one-call         ... also complete_and_claim, one call a cycle

bench/cpu.py reads a backend's CPU time, which a shared or loaded machine
moves by 10 % and more. This counts instructions instead, with valgrind's
callgrind, which gives the same count for the same binary and input whatever
else the machine does. For each schema: a private cluster (initdb in a temp
directory, as the postgres OS user when run as root) gets a database with that
schema and 5,000 queued runs; then `postgres --single` under callgrind runs a
prepared `SELECT runq.complete(...) FROM runq.claim(...)` 100 times, and
again 100 + --cycles times on a fresh copy of that database; the difference
over --cycles is the count per cycle, free of start-up. One statement per cycle (single-user
mode has no pgbench), prepared as a worker's driver would. Needs valgrind.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from cpu import schema_sql  # bench/cpu.py, beside this file
from run import PGBIN

SUPPLY = 5000
CLAIM = {False: "runq.claim(ARRAY[10], 'bench')",
         True: "runq.claim(ARRAY[10], 'bench', kinds => ARRAY['bench.cycle'])"}


def as_owner(args: list[str], stdin: IO[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run args as the postgres OS user when root (initdb and postgres refuse root)."""
    if os.getuid() == 0:
        args = ["runuser", "-u", "postgres", "--", *args]
    return subprocess.run(args, check=True, text=True, stdin=stdin, capture_output=True)


def build(data: Path, sock: Path, schemas: dict[str, str]) -> None:
    """One database per schema name, with SUPPLY queued runs, then stop."""
    as_owner([str(PGBIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
              "--encoding=UTF8", "--locale=C.UTF-8"])
    as_owner([str(PGBIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(data / "log"), "start",
              "-o", f"-c listen_addresses= -k {sock} -p 55432"])
    try:
        for name, schema in schemas.items():
            psql = [str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(sock),
                    "-p", "55432", "-U", "postgres"]
            subprocess.run([*psql, "-d", "postgres", "-c", f"CREATE DATABASE {name}"],
                           check=True, capture_output=True)
            subprocess.run([*psql, "-d", name, "-f", "-"], input=schema, check=True,
                           capture_output=True, text=True)
            subprocess.run([*psql, "-d", name, "-c",
                            "INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id,"
                            " kind) SELECT clock_timestamp(), now(), 10, 'bench', 'bench.cycle'"
                            f" FROM generate_series(1, {SUPPLY})",
                            "-c", "VACUUM ANALYZE runq.runs"], check=True, capture_output=True)
    finally:
        as_owner([str(PGBIN / "pg_ctl"), "-D", str(data), "-w", "stop"])


# One call a cycle: each completes the run the one before claimed, handed on
# through a temporary table (single-user mode has no client variables).
ONE_CALL = ("CREATE TEMP TABLE held (run_id bigint, epoch bigint);\n"
            "INSERT INTO held SELECT run_id, epoch FROM runq.claim(ARRAY[10], 'bench');\n"
            "PREPARE cycle AS WITH next AS (SELECT c.run_id, c.epoch FROM held AS h,"
            " runq.complete_and_claim(h.run_id, h.epoch, NULL, ARRAY[10], 'bench') AS c),"
            " gone AS (DELETE FROM held) INSERT INTO held SELECT * FROM next;\n")


def instructions(data: Path, db: str, cycles: int, kinds: bool, work: Path,
                 one_call: bool = False) -> int:
    script = work / f"cycles_{cycles}_{kinds}_{one_call}.sql"
    if one_call:
        script.write_text(ONE_CALL + "EXECUTE cycle;\n" * cycles
                          + "SELECT count(*) AS done FROM runq.runs WHERE status = 'succeeded';\n")
    else:
        script.write_text(
            f"PREPARE cycle AS SELECT runq.complete(c.run_id, c.epoch) FROM {CLAIM[kinds]} AS c;\n"
            + "EXECUTE cycle;\n" * cycles)
    out = work / f"callgrind.{db}.{cycles}.{kinds}.{one_call}"
    with script.open() as stdin:
        done = as_owner(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                         str(PGBIN / "postgres"), "--single", "-D", str(data), db],
                        stdin=stdin)
    completed = (f'done = "{cycles}"' in done.stdout if one_call
                 else done.stdout.count('complete = "t"') == cycles)
    if not completed:
        sys.exit(f"{db}: not every cycle completed a run:\n{done.stdout[-2000:]}")
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
    ap.add_argument("--cycles", type=int, default=1000, help="cycles counted (after 100)")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("bench/instructions.py needs valgrind (apt-get install valgrind)")

    labels = {"runq_tree": "runq (working tree)"}
    schemas = {"runq_tree": schema_sql(None)}
    for n, rev in enumerate(args.rev):
        labels[f"runq_rev{n}"] = f"runq at {rev}"
        schemas[f"runq_rev{n}"] = schema_sql(rev)
    work = Path(tempfile.mkdtemp(prefix="runq-instr-"))
    os.chmod(work, 0o777)
    try:
        # (database, the claim, one call a cycle): count
        counts: dict[tuple[str, bool, bool], int] = {}
        ways = [(False, False)] + [(True, False)] * args.kinds + [(False, True)] * args.one_call
        for kinds, one_call in ways:
            for cycles in (100, 100 + args.cycles):
                # A fresh copy of every database for each count: the second
                # would otherwise start where the first left its queue.
                data = work / f"data_{cycles}_{kinds}_{one_call}"
                build(data, work, schemas)
                # An older claim may have no kinds argument: kinds on the tree only.
                for db in (["runq_tree"] if kinds else schemas):
                    key = (db, kinds, one_call)
                    counts[key] = (instructions(data, db, cycles, kinds, work, one_call)
                                   - counts.get(key, 0))
        base = counts[("runq_tree", False, False)]
        print("Instructions per claim + complete cycle (callgrind, postgres --single,"
              f" prepared, {args.cycles:,} cycles)\n")
        print("| queue | cycle | instructions per cycle | / working tree's claim + complete |")
        print("| --- | --- | ---: | ---: |")
        for (db, kinds, one_call), n in counts.items():
            cycle = ("complete_and_claim (and the table that hands the run on)" if one_call
                     else "claim (kinds given) + complete" if kinds else "claim + complete")
            print(f"| {labels[db]} | {cycle} | {n / args.cycles:,.0f} | {n / base:.3f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
