"""runq.dashboard.metrics: the /metrics exposition of a real database, read
by a connection that did SET ROLE runq_observer, as the dashboard's pool does.

Each value is compared with what the test made (and the queue figures with
queue_stats read by the superuser), so a wrong label, a missed status or a
usage row out of its hour fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runq import Client
from runq.dashboard.metrics import metrics_text
from runq.types import RecoveryTotals

Connect = Callable[[], psycopg.Connection[Any]]
SHORT = timedelta(milliseconds=1)  # a lease that has expired by the next statement
STATUSES = ("ready", "scheduled", "running", "waiting_for_user", "waiting_for_children",
            "failed")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def observer(connect: Connect) -> Client:
    c = connect()
    c.execute("SET ROLE runq_observer")
    return Client(c)


def scrape(client: Client) -> tuple[dict[str, str], Samples]:
    """(family name -> type, (sample name, labels) -> value) of one scrape."""
    types: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(metrics_text(client).decode()):
        types[family.name] = family.type
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, f"sample twice: {key}"
            samples[key] = s.value
    return types, samples


def named(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def label(**kw: str) -> frozenset[tuple[str, str]]:
    return frozenset(kw.items())


def test_metrics_show_what_was_made(conn: psycopg.Connection[Any], connect: Connect) -> None:
    admin = Client(conn)
    # Class 10: one succeeded (counted nowhere), one failed, one waiting, and
    # one running that lease expiries requeued twice and whose first worker was
    # then fenced. Each is claimed alone, so a claim takes the run just submitted.
    done = admin.submit("t-a", "k1", priority=10).run_id
    [c] = admin.claim([10])
    admin.complete(done, c.epoch, {"ok": True})
    failed = admin.submit("t-a", "k1", priority=10).run_id
    [c] = admin.claim([10])
    admin.fail(failed, c.epoch, {"code": "x", "message": "y"})
    waiting = admin.submit("t-a", "k1", priority=10).run_id
    [c] = admin.claim([10])
    admin.ask_user(waiting, c.epoch, {"q": "which?"})
    # Two lease expiries, then the first worker is fenced. zero_work: requeued
    # at once, not after a backoff, so the next claim has it.
    fenced = admin.submit("t-a", "k1", priority=10, recovery_policy="zero_work").run_id
    [stale] = admin.claim([10], lease=SHORT)
    for lease in (SHORT, None):
        time.sleep(0.01)
        assert [(a.run_id, a.action) for a in admin.sweep()] == [(fenced, "requeued")]
        [fresh] = admin.claim([10], lease=lease)
    assert fresh.run_id == fenced and fresh.epoch == stale.epoch + 2
    assert admin.heartbeat(fenced, stale.epoch) is False
    admin.record_usage(fenced, fresh.epoch, {"input_tokens": 1200, "usd": Decimal("0.25")})
    # Class 0: one running with usage in two records, two ready, one not due.
    running = admin.submit("t-b", "k2", priority=0).run_id
    [c] = admin.claim([0])
    admin.record_usage(running, c.epoch, {"input_tokens": 100})
    admin.record_usage(running, c.epoch, {"input_tokens": 23, "usd": Decimal("0.5")})
    admin.submit("t-b", "k2", priority=0)
    admin.submit("t-b", "k2", priority=0)
    admin.submit("t-b", "k2", priority=0,
                 scheduled_for=datetime.now(timezone.utc) + timedelta(hours=1))
    # Spend from before the last hour, which the gauge must leave out.
    conn.execute("""INSERT INTO runq.run_events (run_id, epoch, type, payload, created_at)
                    VALUES (%s, 1, 'run.usage', '{"input_tokens": 5000}',
                            now() - interval '2 hours')""", (done,))

    types, samples = scrape(observer(connect))

    assert types == {"runq_runs": "gauge", "runq_oldest_ready_age_seconds": "gauge",
                     "runq_fenced": "counter", "runq_requeued": "counter",
                     "runq_usage_last_hour": "gauge", "runq_scrape_duration_seconds": "gauge"}
    made = {("0", "ready"): 2, ("0", "scheduled"): 1, ("0", "running"): 1,
            ("10", "running"): 1, ("10", "waiting_for_user"): 1, ("10", "failed"): 1}
    expected = {label(priority=p, status=s): float(made.get((p, s), 0))
                for p in ("0", "10") for s in STATUSES}
    assert named(samples, "runq_runs") == expected
    from_view = {label(priority=str(row.priority), status=s): float(getattr(row, s))
                 for row in admin.queue_stats() for s in STATUSES}
    assert from_view == expected

    ages = named(samples, "runq_oldest_ready_age_seconds")
    assert set(ages) == {label(priority="0"), label(priority="10")}
    assert ages[label(priority="10")] == 0  # nothing ready: None shows as 0
    assert 0 < ages[label(priority="0")] < 60

    assert named(samples, "runq_fenced_total") == {label(): 1}
    assert named(samples, "runq_requeued_total") == {label(): 2}
    assert admin.recovery_totals() == RecoveryTotals(fenced=1, requeued=2)

    assert named(samples, "runq_usage_last_hour") == {
        label(tenant_id="t-a", kind="k1", key="input_tokens"): 1200.0,
        label(tenant_id="t-a", kind="k1", key="usd"): 0.25,
        label(tenant_id="t-b", kind="k2", key="input_tokens"): 123.0,
        label(tenant_id="t-b", kind="k2", key="usd"): 0.5}

    [duration] = named(samples, "runq_scrape_duration_seconds").items()
    assert duration[0] == label() and 0 <= duration[1] < 10


def test_observer_alone_scrapes_an_empty_queue(connect: Connect) -> None:
    client = observer(connect)
    # The role really is the observer's: a write is refused.
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        client.submit("t", "k")
    types, samples = scrape(client)
    assert set(types) == {"runq_runs", "runq_oldest_ready_age_seconds", "runq_fenced",
                          "runq_requeued", "runq_usage_last_hour",
                          "runq_scrape_duration_seconds"}
    assert {name for name, _ in samples} == {
        "runq_fenced_total", "runq_requeued_total", "runq_scrape_duration_seconds"}
    assert named(samples, "runq_fenced_total") == {label(): 0}
    assert named(samples, "runq_requeued_total") == {label(): 0}
