#!/usr/bin/env python3
"""Instructions the server executes for the cost ledger's calls, for docs/performance/history.md.

    study/cost/instructions.py [--calls 1000]

The method of bench/instructions.py (callgrind, `postgres --single`, a prepared
statement run 100 and 100 + calls times on fresh copies of one database, the
difference over calls) applied to two comparisons:

- checkpoint beside record_usage, each on a run of 10,000 running runs (claimed
  once, epoch 1) that has none yet, the same document in both;
- claim + complete and claim + begin_turn + complete of runs loaded without,
  and with, a budget and a timeout (never reached).

Needs valgrind; run as root or as the postgres OS user.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from instructions import as_owner  # noqa: E402  (bench/instructions.py)
from run import PGBIN  # noqa: E402

DOC = '{"calls": 1, "input_tokens": 1200, "output_tokens": 310, "cost_usd": 0.0123}'
BUDGET = "'{\"cost_usd\": 2.00, \"input_tokens\": 1000000}'::jsonb"
# database: (budget, timeout, statement per call), the statement with $1 a run id or none
CASES = {
    "checkpoint": ("NULL", "NULL", f"SELECT runq.checkpoint($1, 1, '{DOC.replace('calls', 'steps')}')"),
    "record_usage": ("NULL", "NULL", f"SELECT runq.record_usage($1, 1, '{DOC}')"),
    "cycle_plain": ("NULL", "NULL", "SELECT runq.complete(c.run_id, c.epoch) FROM runq.claim(ARRAY[10], 'bench') AS c"),
    "cycle_limited": (BUDGET, "interval '1 hour'",
                      "SELECT runq.complete(c.run_id, c.epoch) FROM runq.claim(ARRAY[10], 'bench') AS c"),
    "turn_plain": ("NULL", "NULL", "SELECT runq.begin_turn(c.run_id, c.epoch) AND runq.complete(c.run_id, c.epoch)"
                   " FROM runq.claim(ARRAY[10], 'bench') AS c"),
    "turn_limited": (BUDGET, "interval '1 hour'",
                     "SELECT runq.begin_turn(c.run_id, c.epoch) AND runq.complete(c.run_id, c.epoch)"
                     " FROM runq.claim(ARRAY[10], 'bench') AS c"),
}
RUNS = 10_000


def build(data: Path, sock: Path) -> None:
    as_owner([str(PGBIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
              "--encoding=UTF8", "--locale=C.UTF-8"])
    as_owner([str(PGBIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(data / "log"), "start",
              "-o", f"-c listen_addresses= -k {sock} -p 55435"])
    psql = [str(PGBIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(sock), "-p", "55435",
            "-U", "postgres"]
    try:
        for db, (budget, timeout, stmt) in CASES.items():
            subprocess.run([*psql, "-d", "postgres", "-c", f"CREATE DATABASE {db}"], check=True,
                           capture_output=True)
            subprocess.run([*psql, "-d", db, "-f", str(ROOT / "sql/runq.sql")], check=True,
                           capture_output=True)
            load = ["-c", "INSERT INTO runq.runs (created_at, updated_at, priority, tenant_id, kind,"
                    f" budget, timeout, deadline) SELECT t, now(), 10, 'bench', 'bench.cycle', {budget},"
                    f" {timeout}, t + {timeout} FROM (SELECT clock_timestamp() AS t"
                    f" FROM generate_series(1, {RUNS}) OFFSET 0) AS s"]
            if "$1" in stmt:  # a worker's write on runs it holds
                load += ["-c", f"SELECT count(*) FROM runq.claim(ARRAY[10], 'bench', interval '1 hour', {RUNS})"]
            subprocess.run([*psql, "-d", db, *load, "-c", "VACUUM ANALYZE"], check=True, capture_output=True)
    finally:
        as_owner([str(PGBIN / "pg_ctl"), "-D", str(data), "-w", "stop"])


def count(data: Path, work: Path, db: str, n: int) -> int:
    stmt = CASES[db][2]
    script = work / f"{db}_{n}.sql"
    if "$1" in stmt:  # runs spread over the table, each once
        script.write_text(f"PREPARE c(bigint) AS {stmt};\n"
                          + "".join(f"EXECUTE c({1 + (i * 7919) % RUNS});\n" for i in range(n)))
    else:
        script.write_text(f"PREPARE c AS {stmt};\n" + "EXECUTE c;\n" * n)
    out = work / f"callgrind.{db}.{n}"
    with script.open() as stdin:
        done = as_owner(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                         str(PGBIN / "postgres"), "--single", "-D", str(data), db], stdin=stdin)
    if done.stdout.count('= "t"') != n:
        sys.exit(f"{db}: not every call returned true:\n{done.stdout[-1000:]}")
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    sys.exit(f"no totals in {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("needs valgrind (apt-get install valgrind)")
    work = Path(tempfile.mkdtemp(prefix="runq-cost-instr-"))
    os.chmod(work, 0o777)
    try:
        per: dict[str, int] = {}
        for n in (100, 100 + args.calls):
            data = work / f"data_{n}"
            build(data, work)
            for db in CASES:
                per[db] = count(data, work, db, n) - per.get(db, 0)
        print(f"Instructions per call or cycle (callgrind, {args.calls:,} after 100)\n")
        print("| work | instructions | ratio |")
        print("| --- | ---: | ---: |")
        for a, b, what in (("checkpoint", "record_usage", "`checkpoint` / `record_usage`"),
                           ("cycle_plain", "cycle_limited", "claim + complete, without / with budget and timeout"),
                           ("turn_plain", "turn_limited", "claim + begin_turn + complete, without / with")):
            x, y = per[a] / args.calls, per[b] / args.calls
            print(f"| {what} | {x:,.0f} / {y:,.0f} | {x / y if a != 'checkpoint' else y / x:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
