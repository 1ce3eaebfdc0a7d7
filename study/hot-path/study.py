#!/usr/bin/env python3
"""Where a claim + complete cycle's instructions go, and what a narrow-table
storage would cost: figures for RESULTS.md.

    study/hot-path/study.py [--cycles 300]

The method of bench/instructions.py (callgrind, `postgres --single`, a prepared
statement run 100 and 100 + cycles times on fresh copies of one database, the
difference over cycles), one run, for:

- the floor (bench/references.sql);
- runq as in sql/runq.sql, and the same with parts of runq.runs dropped: the
  run-shape CHECK, index groups, all of them at once (what is left is the cost
  of the functions' own logic on a table with only its key and claim index);
- the prototypes of prototypes.sql (designs a, b, c), which have none of
  runq's logic: no argument checks, limits, pauses, kinds or resume data.

Needs valgrind; run as root or as the postgres OS user.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import instructions as bench  # bench/instructions.py

HERE = Path(__file__).resolve().parent
RUNQ = (ROOT / "sql/runq.sql").read_text()

# runq with parts of runq.runs dropped: (label, statements appended to the schema)
LISTS = ["runs_list_tenant_idx", "runs_list_kind_idx"]
RUNNING = ["runs_running_tenant_idx", "runs_running_kind_idx"]
QUEUED = ["runs_queued_tenant_idx", "runs_queued_kind_idx", "runs_parked_idx",
          "runs_queue_expiry_idx", "runs_deadline_idx", "runs_claimable_kind_idx"]
OTHERS = ["runs_held_idx", "runs_dead_letter_idx", "runs_session_active_key",
          "runs_schedule_active_key"]
CHECK = "ALTER TABLE runq.runs DROP CONSTRAINT runs_shape_consistent;"


def drop(indexes: list[str]) -> str:
    return "".join(f"DROP INDEX runq.{i};" for i in indexes)


VARIANTS = {
    "runq": "",
    "runq without the run-shape CHECK": CHECK,
    "runq without runs_held_idx": drop(["runs_held_idx"]),
    "runq without the 2 running-count indexes": drop(RUNNING),
    "runq without the 2 list indexes": drop(LISTS),
    "runq without the 6 indexes of queued runs only": drop(QUEUED),
    "runq without the CHECK and 15 of its 17 indexes": CHECK + drop(LISTS + RUNNING + QUEUED + OTHERS),
}

PROTO_SUPPLY = (
    ("WITH r AS (INSERT INTO p.runs (priority, tenant_id, kind, created_at)"
    " SELECT 10, 'bench', 'bench.cycle', clock_timestamp() FROM generate_series(1, 5000)"
    " RETURNING run_id, priority, ready_at, tenant_id, kind)"
    " INSERT INTO p.{table} (run_id, priority, ready_at, tenant_id, kind) SELECT * FROM r"),
    "VACUUM ANALYZE")
PROTO_CYCLE = bench.Call(
    "claim + complete",
    "PREPARE cycle AS SELECT p.complete(c.run_id, c.epoch) AS done"
    " FROM p.claim(ARRAY[10], 'bench') AS c;\n", "EXECUTE cycle;\n", "done")
PROTO_HEARTBEAT = bench.Call(
    "heartbeat",
    "SELECT count(*) FROM p.claim(ARRAY[10], 'bench', interval '1 hour', {runs});\n"
    "PREPARE beat(bigint) AS SELECT p.heartbeat($1, 1) AS alive;\n",
    "EXECUTE beat({i});\n", "alive")


def prototypes() -> dict[str, str]:
    """prototypes.sql's common part plus one design, by design letter."""
    text = (HERE / "prototypes.sql").read_text()
    common, *designs = re.split(r"^-- design ", text, flags=re.MULTILINE)
    return {d[0]: common + "-- design " + d for d in designs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=300)
    args = ap.parse_args()
    labels: dict[str, str] = {bench.FLOOR_DB: "floor"}
    schemas = {bench.FLOOR_DB: ((bench.HERE / "references.sql").read_text(),
                                bench.FLOOR_SUPPLY)}
    for n, (label, extra) in enumerate(VARIANTS.items()):
        labels[f"v{n}"] = label
        schemas[f"v{n}"] = (RUNQ + "\n" + extra + "\n", bench.RUNQ_SUPPLY)
    for letter, schema in prototypes().items():
        labels[f"p{letter}"] = f"prototype {letter}"
        table = "live" if letter == "c" else "ready"
        schemas[f"p{letter}"] = (schema, (PROTO_SUPPLY[0].format(table=table), PROTO_SUPPLY[1]))
    variants = [db for db in schemas if db.startswith("v")]
    protos = [db for db in schemas if db.startswith("p")]
    plan = [(bench.FLOOR_CYCLE, [bench.FLOOR_DB]),
            (bench.cycle("runq.claim(ARRAY[10], 'bench')"), variants),
            (PROTO_CYCLE, protos),
            (bench.FLOOR_HEARTBEAT, [bench.FLOOR_DB]), (bench.HEARTBEAT, variants),
            (PROTO_HEARTBEAT, protos)]
    work = Path(tempfile.mkdtemp(prefix="runq-hot-path-"))
    os.chmod(work, 0o777)
    try:
        built = work / "built"
        bench.build(built, work, schemas)
        rows: list[tuple[str, str, float]] = []
        for call, dbs in plan:
            counts = dict.fromkeys(dbs, 0)
            for calls in (100, 100 + args.cycles):
                data = work / "data"
                bench.as_owner(["cp", "-a", str(built), str(data)])
                for db in dbs:
                    counts[db] = (bench.instructions(data, db, calls, call, work,
                                                     100 + args.cycles) - counts[db])
                bench.as_owner(["rm", "-rf", str(data)])
            rows += [(labels[db], call.label, c / args.cycles) for db, c in counts.items()]
        floor = {label: c for queue, label, c in rows if queue == "floor"}
        print(f"Instructions per call (callgrind, {args.cycles:,} calls counted)\n")
        print("| schema | call | instructions per call | / the floor's |")
        print("| --- | --- | ---: | ---: |")
        for queue, label, c in rows:
            print(f"| {queue} | {label} | {c:,.0f} | {c / floor[label]:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
