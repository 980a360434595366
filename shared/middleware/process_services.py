"""Readies a worker process's services before its consumers start (`on_boot`), starts its
health/metrics server when it has booted; stops it and flushes the run writer when the worker
shuts down."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dramatiq
import structlog
from dramatiq.middleware import Middleware

from ..observability.health import HealthServer
from ..observability.metrics import UP

log = structlog.get_logger("jobfleet.process")


class ProcessServices(Middleware):
    def __init__(
        self,
        *,
        service: str,
        make_server: Callable[[], HealthServer | None],
        on_stop: Callable[[], None],
        on_boot: Callable[[], None] | None = None,
    ) -> None:
        self.service = service
        self.make_server = make_server
        self.on_stop = on_stop
        self.on_boot = on_boot
        self.server: HealthServer | None = None

    def before_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        if self.on_boot is not None:
            self.on_boot()

    def after_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        try:
            self.server = self.make_server()
            if self.server is not None:
                self.server.start()
        except OSError as exc:
            log.error("health.bind_failed", error=str(exc))
        UP.labels(self.service).set(1)
        log.info("worker.ready", service=self.service, queues=sorted(broker.get_declared_queues()))

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        log.info("worker.stopping", service=self.service)

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        UP.labels(self.service).set(0)
        if self.server is not None:
            self.server.stop()
        self.on_stop()
        log.info("worker.stopped", service=self.service)
