"""Failover under load, reduced for CI: the rig of tests/failover.py (a
primary and a streaming standby of the test's own, the primary SIGKILLed,
the standby promoted, the workers following a multi-host conninfo) with a
Python pool of sync handlers, one of async handlers and the TypeScript
worker, on PostgreSQL 15 only (marked once). `make failover` runs the full
measurement (20 failovers; 5 with asynchronous replication).

  test_synchronous_failovers_lose_and_repeat_nothing
      two failovers with synchronous replication: no acknowledged submit,
      claim, end, usage record, checkpoint or tool transition is missing on
      the last primary; no run ended twice (by the ledger or the event log),
      no non_idempotent tool body ran twice, no usage was counted twice and
      no resent end logged a run.fenced; every run ended; each new
      primary saw a claim within 30 s of the kill; each of the three workers
      ended runs, and the TypeScript worker never crashed (it exits 0 on
      SIGTERM at the end); and the failovers bit: runs were running at each
      kill and went on to succeed under the epochs they held then.
  test_asynchronous_failover_losses_are_the_lag_windows
      one failover with asynchronous replication, the standby held back
      for half a second first: something acknowledged is lost (the rig
      makes it so), and every loss was acknowledged inside the window the
      standby lagged, every repeat follows a loss of its own run.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from failover import LOST, REPEATED, Options, report, run_rig, workspace

pytestmark = pytest.mark.once


@pytest.fixture
def base() -> Iterator[Path]:
    assert shutil.which("node"), "node is needed for the TypeScript worker (.ci/run installs it)"
    with workspace() as path:
        yield path


def test_synchronous_failovers_lose_and_repeat_nothing(base: Path) -> None:
    outcome = run_rig(Options(failovers=2, sync=True), base)
    text = report(outcome)
    assert outcome.errors == [], text
    assert outcome.ts_exit == 0, text
    for name in LOST:
        assert outcome.counts[f"lost {name}"] == 0, text
    for name in REPEATED:
        assert outcome.counts[name] == 0, text
    assert outcome.counts["runs not ended at the end"] == 0, text
    assert outcome.counts["runs submitted (acknowledged)"] > 100, text
    assert len(outcome.failovers) == 2, text
    for f in outcome.failovers:
        assert f.first_claim is not None and f.first_claim - f.killed < 30, text
        assert f.held, f"no run was running at the kill at {f.killed}:\n{text}"
        assert f.carried, f"no run held at the kill ended under its epoch:\n{text}"
    assert outcome.statuses.get("succeeded") == outcome.counts["runs submitted (acknowledged)"]
    for worker in ("py-sync", "py-async", "ts"):
        assert outcome.counts.get(f"runs ended by {worker}", 0) > 0, text


def test_asynchronous_failover_losses_are_the_lag_windows(base: Path) -> None:
    outcome = run_rig(Options(failovers=1, sync=False), base)
    text = report(outcome)
    assert outcome.errors == [], text
    assert outcome.ts_exit == 0, text
    assert sum(outcome.counts[f"lost {name}"] for name in LOST) > 0, text
    assert outcome.unexplained == [], text
