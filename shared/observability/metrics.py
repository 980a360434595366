"""Prometheus metrics of DESIGN §5, correct with several processes.

With `PROMETHEUS_MULTIPROC_DIR` set (the launcher sets one per fleet), every process writes its
samples to files there and `/metrics` of any process aggregates them; without it, a plain
per-process registry is used. Queue depth and outbox backlog are read at scrape time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

JOBS = Counter(
    "jobfleet_jobs_total", "Finished attempts by job, queue and status", ["job", "queue", "status"]
)
DURATION = Histogram(
    "jobfleet_job_duration_seconds",
    "Handler duration by job and queue",
    ["job", "queue"],
    buckets=(
        0.001,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        2.5,
        5,
        10,
        30,
        60,
        300,
        900,
        3600,
    ),
)
LATENCY = Histogram(
    "jobfleet_job_start_latency_seconds",
    "Time from send to handler start",
    ["queue"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, 300),
)
ENQUEUED = Counter("jobfleet_sends_total", "Sends by job and result", ["job", "result"])
OUTBOX_PUBLISHED = Counter(
    "jobfleet_outbox_published_total", "Outbox events by outcome", ["outcome"]
)
UP = Gauge(
    "jobfleet_process_up", "1 while the process serves", ["service"], multiprocess_mode="liveall"
)


class ScrapeCollector(Collector):
    """Gauges computed when scraped (queue depth from Redis, backlog from Postgres)."""

    def __init__(self, sample: Callable[[], dict[str, dict[tuple[str, ...], float]]]) -> None:
        self.sample = sample

    def collect(self) -> Iterable[Metric]:
        try:
            values = self.sample()
        except Exception:  # a scrape must not fail because Redis or Postgres is down
            return []
        depth = GaugeMetricFamily(
            "jobfleet_queue_depth", "Messages by queue and state", labels=["queue", "state"]
        )
        for (queue, state), value in values.get("depth", {}).items():
            depth.add_metric([queue, state], value)
        outbox = GaugeMetricFamily("jobfleet_outbox_pending", "Outbox events not yet published")
        for _, value in values.get("outbox", {}).items():
            outbox.add_metric([], value)
        paused = GaugeMetricFamily(
            "jobfleet_queue_paused", "1 while an operator has paused the queue", labels=["queue"]
        )
        for (queue,), value in values.get("paused", {}).items():
            paused.add_metric([queue], value)
        return [depth, outbox, paused]


def render(extra: Collector | None = None) -> bytes:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        from prometheus_client import REGISTRY

        for collector in list(REGISTRY._collector_to_names):  # the default process metrics
            registry.register(collector)
    if extra is not None:
        registry.register(extra)
    return generate_latest(registry)
