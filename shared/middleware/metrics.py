"""Counts finished attempts by status, their duration and their send-to-start latency.

Registered before `Tracking`, so its after-hook runs after Tracking's (Dramatiq runs after-hooks
in reverse) and sees the outcome Tracking decided.
"""

from __future__ import annotations

import time
from typing import Any

import dramatiq
from dramatiq.middleware import Middleware

from ..broker import delivery_of
from ..observability.metrics import DURATION, JOBS, LATENCY


class Metrics(Middleware):
    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        sent_at = message.options.get("sent_at")
        if isinstance(sent_at, int | float) and "eta" not in message.options:
            LATENCY.labels(message.queue_name).observe(max(0.0, time.time() - sent_at))
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
        queue = message.queue_name.removesuffix(".DQ")
        JOBS.labels(message.actor_name, queue, status).inc()
        t0 = state.metrics_t0
        if t0 is not None:
            DURATION.labels(message.actor_name, queue).observe(time.perf_counter() - t0)

    def after_skip_message(self, broker: dramatiq.Broker, message: Any) -> None:
        JOBS.labels(message.actor_name, message.queue_name.removesuffix(".DQ"), "SKIPPED").inc()
