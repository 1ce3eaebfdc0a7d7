"""Why cycles with saturated tenants lose more than cycles without limits under a
held snapshot: the buffers one claim touches after N seconds of 16-client cycles.

Usage (a server of its own, nothing else running on the machine):
    RUNQ_DATABASE_URL=... .venv/bin/python study/limits/held_claim_buffers.py [SECONDS]

Loads bench/run.py's saturated case (200,000 runs dealt round 12 tenants), with
and without 6 of the tenants at a limit of 2, runs cycle_runq.pgbench at 16
clients for SECONDS (default 20) under a held snapshot, then, with the snapshot
still held, EXPLAIN (ANALYZE, BUFFERS)s the claim's pick. Each claim steps over
the entries of the runs claimed since the snapshot; without limits they point
at the rows as loaded (one heap page for many), with limits an admitted run's
entry points at the row version its admission wrote, a heap page of its own.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import run

PICK = ("BEGIN; EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT r.run_id FROM runq.runs AS r"
        " WHERE r.status = 'queued' AND NOT r.parked AND r.priority = ANY ('{10}')"
        " AND r.ready_at <= now() ORDER BY r.priority, r.ready_at, r.run_id"
        " LIMIT 1 FOR UPDATE SKIP LOCKED; ROLLBACK")


def main() -> None:
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    bench = run.Bench(run.server_url(), run.QUICK)
    bench.setup()
    for limited in (False, True):
        bench.reset()
        bench.load_runq(200_000, 10, tenant="'t' || g % 12")
        if limited:
            bench.psql("SELECT runq.set_limit('tenant', 't' || g, 2) FROM generate_series(0, 5) AS g")
        bench.psql("VACUUM ANALYZE runq.runs")
        bench.psql("CHECKPOINT")
        with bench.held_snapshot():
            tps, _ = bench.pgbench("cycle_runq.pgbench", 16, seconds=seconds)
            plan = bench.psql(PICK)
        buffers = next(line.split("=")[1] for line in plan.splitlines() if "Buffers" in line)
        print(f"{'6 of 12 tenants at a limit of 2' if limited else 'no limits'}: {tps:,.0f} cycles/s;"
              f" the claim's pick after {seconds} s: {buffers} buffers,"
              f" {plan.splitlines()[-1].strip()}")


if __name__ == "__main__":
    main()
