"""Prometheus metrics of a runq database, read at scrape time.

The dashboard serves ``metrics_text(client)`` at /metrics, its client over a
pool whose connections are ``runq_observer``: every figure comes from
queue_stats, recovery_totals and usage_report, which that role may read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from runq import Client

__all__ = ["CONTENT_TYPE_LATEST", "RunqCollector", "metrics_text"]

STATUSES = ("ready", "scheduled", "running", "waiting_for_user", "waiting_for_children",
            "failed")


class RunqCollector:
    """A custom collector: every collect() queries the database afresh."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def describe(self) -> Iterable[Metric]:
        # Without describe(), a registry with auto_describe would call
        # collect() at register time, which is a scrape of the database.
        return []

    def collect(self) -> Iterable[Metric]:
        started = time.perf_counter()
        stats = self.client.queue_stats()
        totals = self.client.recovery_totals()
        # The client's clock, not the database's: a skew of a few seconds
        # only shifts the window's edge.
        usage = self.client.usage_report(since=datetime.now(timezone.utc) - timedelta(hours=1))
        elapsed = time.perf_counter() - started

        runs = GaugeMetricFamily("runq_runs", "Runs by priority class and status "
                                 "(ready and scheduled are queued runs due and not yet due).",
                                 labels=["priority", "status"])
        oldest = GaugeMetricFamily("runq_oldest_ready_age_seconds",
                                   "Age (since submit) of the oldest ready run per priority "
                                   "class; 0 when none is ready.", labels=["priority"])
        for row in stats:
            priority = str(row.priority)
            for status in STATUSES:
                runs.add_metric([priority, status], getattr(row, status))
            age = row.oldest_ready_age
            oldest.add_metric([priority], age.total_seconds() if age is not None else 0.0)
        yield runs
        yield oldest

        yield CounterMetricFamily("runq_fenced", "Stored run.fenced events: writes of a stale "
                                  "worker refused. A purge lowers it (a counter reset to "
                                  "Prometheus).", value=totals.fenced)
        yield CounterMetricFamily("runq_requeued", "Stored run.requeued events of expired "
                                  "leases. A purge lowers it (a counter reset to Prometheus).",
                                  value=totals.requeued)

        spent = GaugeMetricFamily("runq_usage_last_hour", "Usage recorded in the last hour, "
                                  "per tenant, kind and usage key (fenced epochs included).",
                                  labels=["tenant_id", "kind", "key"])
        for usage_row in usage:
            for key, amount in usage_row.usage.items():
                spent.add_metric([usage_row.tenant_id, usage_row.kind, key], float(amount))
        yield spent

        yield GaugeMetricFamily("runq_scrape_duration_seconds",
                                "Wall time of this scrape's queries.", value=elapsed)


def metrics_text(client: Client) -> bytes:
    """The exposition (CONTENT_TYPE_LATEST) of one scrape through client."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunqCollector(client))
    return generate_latest(registry)
