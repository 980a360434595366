"""Counts finished attempts by status, their duration and their send-to-start latency.

Registered before `Tracking`, so its after-hook runs after Tracking's (Dramatiq runs after-hooks
in reverse) and sees the outcome Tracking decided.

The labelled series of a job are looked up once per process (`_Series`), not per message: each
`labels(...)` call builds a key and takes the metric's lock, three times per job.
"""

from __future__ import annotations

import time
from typing import Any

import dramatiq
from dramatiq.middleware import Middleware

from ..broker import delivery_of
from ..observability.metrics import DURATION, JOBS, LATENCY


class _Series:
    """The series of one job name on one queue."""

    __slots__ = ("duration", "job", "jobs", "latency", "queue")

    def __init__(self, job: str, queue_name: str) -> None:
        self.job, self.queue = job, queue_name.removesuffix(".DQ")
        self.latency = LATENCY.labels(queue_name)  # as it came (a delay queue's has an eta)
        queue = self.queue
        self.duration = DURATION.labels(job, queue)
        self.jobs: dict[str, Any] = {}

    def count(self, status: str) -> None:
        counter = self.jobs.get(status)
        if counter is None:
            counter = self.jobs[status] = JOBS.labels(self.job, self.queue, status)
        counter.inc()


class Metrics(Middleware):
    def __init__(self) -> None:
        self._series: dict[tuple[str, str], _Series] = {}

    def _of(self, message: Any) -> _Series:
        key = (message.actor_name, message.queue_name)
        series = self._series.get(key)
        if series is None:
            series = _Series(message.actor_name, message.queue_name)
            self._series[key] = series
        return series

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        sent_at = message.options.get("sent_at")
        if isinstance(sent_at, int | float) and "eta" not in message.options:
            self._of(message).latency.observe(max(0.0, time.time() - sent_at))
        delivery_of(message).metrics_t0 = time.perf_counter()

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        state = delivery_of(message)
        outcome = state.outcome
        status = outcome.status if outcome is not None else ("ERROR" if exception else "COMPLETED")
        series = self._of(message)
        series.count(status)
        t0 = state.metrics_t0
        if t0 is not None:
            series.duration.observe(time.perf_counter() - t0)

    def after_skip_message(self, broker: dramatiq.Broker, message: Any) -> None:
        self._of(message).count("SKIPPED")
