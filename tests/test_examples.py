"""What a newcomer runs first works: the psql example (examples/psql/), against
a fresh database, and the demo (demo/demo.py, behind `make demo`), which makes
its own."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import psycopg
import pytest
from pgutil import ROOT, pg_tool

EXAMPLE = ROOT / "examples" / "psql" / "worker_lifecycle.sql"


def run_example(db_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([pg_tool("psql"), "-X", "-v", "ON_ERROR_STOP=1", "-f", str(EXAMPLE),
                           "-d", db_url], capture_output=True, text=True, timeout=60)


def test_psql_worker_lifecycle(db_url: str) -> None:
    proc = run_example(db_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in ["   runq.submit -> run 1 created",
                 "   runq.claim -> run 1 epoch 1 attempt 1",
                 "   heartbeat, begin_turn, begin_tool, end_tool, checkpoint -> true",
                 "   runq.release -> true; the run is queued with 0 attempts used",
                 '   runq.claim -> run 1 epoch 2 resumed from checkpoint {"step": 1}',
                 "   fenced: heartbeat and complete with stale epoch 1 returned false;",
                 "   the run is still running at epoch 2 (one run.fenced event)",
                 "   runq.complete -> true; the run succeeded"]:
        assert line in proc.stdout, f"{line!r} missing from:\n{proc.stdout}"
    assert "FAILED" not in proc.stdout
    assert proc.stderr == ""


def test_psql_worker_lifecycle_stops_when_a_check_fails(db_url: str) -> None:
    """A queued interactive run of someone else's is claimed first: the
    example's check says so and psql exits non-zero."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT runq.submit(tenant_id => 'other', kind => 'k', priority => 0)")
    proc = run_example(db_url)
    assert proc.returncode != 0
    assert "FAILED: runq.claim did not return run 2 at epoch 1" in proc.stdout
    assert "a result broke the runq contract" in proc.stderr
    assert "5. Another worker" not in proc.stdout


@pytest.mark.once
def test_demo(server_url: str) -> None:
    """demo/demo.py shows every guarantee, checks its evidence and exits 0, in
    under a minute and a half, in a database of its own that it drops at the
    end (a plain DROP DATABASE, which fails while its workers are connected)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "demo" / "demo.py"),
                           "--database-url", server_url],
                          capture_output=True, text=True, timeout=180)
    elapsed = time.monotonic() - started
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for step in ("== 1. Priority classes", "== 2. A worker killed", "== 3. A worker frozen",
                 "== 4. A run asks", "== 5. Idempotent", "== 6. The dead letter",
                 "== 7. A budget across", "== 8. An agent killed",
                 "== 9. Final runq.queue_stats"):
        assert step in proc.stdout
    assert "FAIL" not in proc.stdout
    assert "checks held" in proc.stdout.splitlines()[-1]
    assert elapsed < 90, f"the demo took {elapsed:.1f} s"
    name = re.search(r"^runq demo in database (runq_demo_\d+) ", proc.stdout, re.MULTILINE)
    assert name, proc.stdout
    with psycopg.connect(server_url, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s",
                            [name.group(1)]).fetchone()
    assert left == (0,), f"the demo left its database {name.group(1)}"
