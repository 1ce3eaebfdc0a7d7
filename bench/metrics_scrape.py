#!/usr/bin/env python3
"""What a /metrics scrape costs over a long history: runq.dashboard.metrics
read by runq_observer, with N runs stored.

    bench/metrics_scrape.py                      10,000,000 runs, 50 scrapes
    bench/metrics_scrape.py --runs 100000        a smoke run
    bench/metrics_scrape.py --live 7000          a live set of 7,000 beside the history

Creates the database runq_metrics_bench (dropped first if it exists), deploys
runq into it with sqitch, and writes N runs straight into runq.runs in
chunks of a million (one transaction each): per 1,000 runs 5 queued (one
in five of them not due for an hour; the classes 0, 10, 20 and 30 take turns
by the thousand), 5 failed, 1 waiting_for_user, 1 running and 988 succeeded.
The finished ones are spread over the last 30 days; the others are from the
last hour, as a live queue's are. Each run gets a run.created event; every
fourth finished run and every running or waiting one a run.usage event (and
its run_usage totals), so the last hour holds about N / 2,880 + N / 500 of
them; one run in 1,000 a lease-expiry run.requeued, one in 10,000 a released
one (not counted), one in 5,000 a run.fenced. With --live K the live set is
K runs whatever N is, the newest ones (5 in 7 queued, 1 running, 1 waiting),
and one run of the history in 10,000 failed: what a scrape costs as the
history grows, apart from what it costs as the backlog grows. Then VACUUM
ANALYZE, as
autovacuum would leave a database at rest, and the scrapes: metrics_text over a Client whose
pool is the dashboard's (SET ROLE runq_observer), after one scrape to warm the caches.
Prints p50/p99/max of a whole scrape and of each of its three queries, in ms.
--explain prints the plans (auto_explain, with buffers) of every statement
the three queries run, inside the functions too (as the superuser, jit off
as on the dashboard's pool).

The database is left in place (it takes minutes to load); --reuse scrapes it
again without loading. Uses RUNQ_DATABASE_URL, or starts the throwaway
cluster with scripts/pg. Run from anywhere; sqitch runs in the repository root.
"""
from __future__ import annotations

import argparse
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
from psycopg import sql
from run import ROOT, percentile, server_url, with_db  # bench/run.py, beside this file

from runq import Client
from runq.dashboard.app import role_pool
from runq.dashboard.metrics import metrics_text

DB = "runq_metrics_bench"
CHUNK = 1_000_000

# One chunk of runs, g the run's number (its run_id too: a run's events are
# written from the same numbers). Which status a run has is g % 1000.
RUNS = """
INSERT INTO runq.runs (run_id, created_at, updated_at, scheduled_for, priority, tenant_id, kind,
                       status, attempts, lease_epoch, lease, lease_expires_at, heartbeat_at,
                       lease_owner, finished_at, failure, question, result)
OVERRIDING SYSTEM VALUE
SELECT g, t.created_at, t.created_at, t.scheduled_for, (g / 1000 %% 4) * 10,
       'tenant-' || g %% 50, 'kind-' || g %% 8, s.status,
       CASE WHEN s.status = 'queued' THEN 0 ELSE 1 END,
       CASE WHEN s.status = 'queued' THEN 0 ELSE 1 END,
       CASE WHEN s.status = 'running' THEN interval '30 seconds' END,
       CASE WHEN s.status = 'running' THEN now() + interval '1 hour' END,
       CASE WHEN s.status = 'running' THEN now() END,
       CASE WHEN s.status IN ('running', 'waiting_for_user') THEN 'bench-worker' END,
       CASE WHEN s.status IN ('succeeded', 'failed') THEN t.created_at + interval '1 minute' END,
       CASE WHEN s.status = 'failed' THEN '{"code": "bench", "message": "made up"}'::jsonb END,
       CASE WHEN s.status = 'waiting_for_user' THEN '{"q": "which one?"}'::jsonb END,
       CASE WHEN s.status = 'succeeded' THEN '{"ok": true}'::jsonb END
  FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g
 CROSS JOIN LATERAL (SELECT CASE WHEN %(live)s::bigint IS NULL THEN
                                 CASE WHEN g %% 1000 < 5 THEN 'queued'
                                      WHEN g %% 1000 < 10 THEN 'failed'
                                      WHEN g %% 1000 = 10 THEN 'waiting_for_user'
                                      WHEN g %% 1000 = 11 THEN 'running'
                                      ELSE 'succeeded' END
                            -- --live: the newest runs are the live ones,
                            -- where a live queue's rows are in the heap
                            WHEN g > %(n)s - %(live)s THEN
                                 CASE WHEN g %% 7 < 5 THEN 'queued'
                                      WHEN g %% 7 = 5 THEN 'running'
                                      ELSE 'waiting_for_user' END
                            WHEN g %% 10000 = 0 THEN 'failed'
                            ELSE 'succeeded' END AS status) AS s
 CROSS JOIN LATERAL (
       SELECT CASE WHEN s.status IN ('queued', 'running', 'waiting_for_user')
                   THEN now() - (g %% 3600) * interval '1 second'
                   ELSE now() - interval '30 days'
                        + (interval '30 days' - interval '2 minutes') * g / %(n)s
              END AS created_at,
              CASE WHEN s.status = 'queued' AND g %% 10 = 0 THEN now() + interval '1 hour'
              END AS scheduled_for) AS t
"""

EVENTS = """
INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
SELECT r.run_id, 0, 'run.created', '{}', r.created_at
  FROM runq.runs AS r WHERE r.run_id BETWEEN %(lo)s AND %(hi)s
UNION ALL
SELECT r.run_id, 1, 'run.usage',
       jsonb_build_object('input_tokens', r.run_id %% 1000, 'output_tokens', r.run_id %% 300,
                          'usd', 0.0123),
       least(r.created_at + interval '30 seconds', now())
  FROM runq.runs AS r
 WHERE r.run_id BETWEEN %(lo)s AND %(hi)s
   AND (r.run_id %% 4 = 0 AND r.status <> 'queued' OR r.status IN ('running', 'waiting_for_user'))
UNION ALL
SELECT r.run_id, 1, 'run.requeued',
       jsonb_build_object('reason', CASE WHEN r.run_id %% 10000 = 500 THEN 'released'
                                         ELSE 'lease_expired' END),
       r.created_at + interval '20 seconds'
  FROM runq.runs AS r
 WHERE r.run_id BETWEEN %(lo)s AND %(hi)s AND (r.run_id %% 1000 = 999 OR r.run_id %% 10000 = 500)
UNION ALL
SELECT r.run_id, 1, 'run.fenced',
       '{"operation": "heartbeat", "current_epoch": 2, "status": "running"}',
       r.created_at + interval '25 seconds'
  FROM runq.runs AS r WHERE r.run_id BETWEEN %(lo)s AND %(hi)s AND r.run_id %% 5000 = 501
"""

USAGE = """
INSERT INTO runq.run_usage (run_id, usage)
SELECT e.run_id, e.payload
  FROM runq.run_events AS e
 WHERE e.run_id BETWEEN %(lo)s AND %(hi)s AND e.type = 'run.usage'
"""

# The scrape's three queries, for --explain: auto_explain logs the plan of
# each statement inside the functions as they run.
EXPLAINED = {
    "queue_stats": "SELECT * FROM runq.queue_stats ORDER BY priority",
    "recovery_totals": "SELECT * FROM runq.recovery_totals()",
    "usage_report": "SELECT * FROM runq.usage_report(now() - interval '1 hour')",
}
AUTO_EXPLAIN = ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                "SET auto_explain.log_analyze = on", "SET auto_explain.log_buffers = on",
                "SET auto_explain.log_nested_statements = on",
                "SET auto_explain.log_level = notice", "SET client_min_messages = notice",
                "SET jit = off")


def load(admin: str, url: str, runs: int, live: int | None) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    subprocess.run(["sqitch", "--quiet", "deploy", f"db:{url}"], cwd=ROOT, check=True)
    with psycopg.connect(url, autocommit=True) as conn:
        # A crash mid-load loses a chunk, never corrupts: the database is scratch.
        conn.execute("SET synchronous_commit = off")
        for lo in range(1, runs + 1, CHUNK):
            hi = min(lo + CHUNK - 1, runs)
            started = time.monotonic()
            args = {"lo": lo, "hi": hi, "n": runs, "live": live}
            with conn.transaction():
                conn.execute(RUNS, args)
                conn.execute(EVENTS, args)
                conn.execute(USAGE, args)
            print(f"  runs {lo:,}..{hi:,} loaded in {time.monotonic() - started:.0f} s",
                  flush=True)
        conn.execute("SELECT setval('runq.runs_run_id_seq', %s)", (runs,))
        started = time.monotonic()
        conn.execute("VACUUM ANALYZE")
        print(f"  VACUUM ANALYZE in {time.monotonic() - started:.0f} s", flush=True)


def timed(call: Callable[[], Any], times: int) -> list[float]:
    """ms of each of times calls."""
    out = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def summary(ms: list[float]) -> str:
    return (f"p50 {percentile(ms, 50):7.2f}  p99 {percentile(ms, 99):7.2f}  "
            f"max {max(ms):7.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000_000, help="runs to store")
    ap.add_argument("--scrapes", type=int, default=50, help="scrapes to time")
    ap.add_argument("--live", type=int, default=None, metavar="K",
                    help="a live set of K runs, the newest (default: 12 in 1,000 runs)")
    ap.add_argument("--reuse", action="store_true",
                    help=f"scrape the {DB} a previous run left, loading nothing")
    ap.add_argument("--explain", action="store_true",
                    help="print EXPLAIN (ANALYZE, BUFFERS) of each query's SQL")
    args = ap.parse_args()
    admin = server_url()
    url = with_db(admin, DB)
    if not args.reuse:
        print(f"loading {args.runs:,} runs into {DB}", flush=True)
        started = time.monotonic()
        load(admin, url, args.runs, args.live)
        print(f"  loaded in {time.monotonic() - started:.0f} s", flush=True)

    with psycopg.connect(url, autocommit=True) as conn:
        stored = conn.execute("SELECT count(*) FROM runq.runs").fetchone()
        by_status = conn.execute("SELECT status, count(*) FROM runq.runs GROUP BY status "
                                 "ORDER BY status").fetchall()
        events = conn.execute("SELECT count(*) FROM runq.run_events").fetchone()
        if args.explain:
            notices: list[str] = []
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            for setting in AUTO_EXPLAIN:
                conn.execute(setting)
            for name, query in EXPLAINED.items():
                notices.clear()
                conn.execute(query)
                print(f"\n-- {name}\n" + "\n".join(notices))
    assert stored is not None and events is not None
    print(f"\nruns stored: {stored[0]:,} ("
          + ", ".join(f"{status} {n:,}" for status, n in by_status)
          + f"); events stored: {events[0]:,}")

    # The pool the dashboard serves /metrics from, set up as it sets it up.
    with role_pool(url, "runq_observer", "runq-metrics-bench") as pool:
        client = Client(pool)
        metrics_text(client)  # warm: plans, catalog and buffer caches
        since = datetime.now(timezone.utc) - timedelta(hours=1)
        print(f"{args.scrapes} scrapes as runq_observer:")
        print(f"  metrics_text     {summary(timed(lambda: metrics_text(client), args.scrapes))}")
        print(f"  queue_stats      {summary(timed(client.queue_stats, args.scrapes))}")
        print(f"  recovery_totals  {summary(timed(client.recovery_totals, args.scrapes))}")
        print(f"  usage_report     "
              f"{summary(timed(lambda: client.usage_report(since), args.scrapes))}")
        size = len(metrics_text(client))
    print(f"  exposition: {size:,} bytes")


if __name__ == "__main__":
    main()
