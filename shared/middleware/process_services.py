"""Readies a worker process's services before its consumers start (`on_boot`), starts its
health/metrics server when it has booted; stops it and flushes the run writer when the worker
shuts down.

`worker.ready` is logged when the process is ready as its `/health/ready` means it: its health
server bound and every readiness check passing. Otherwise `worker.not_ready` says why (the
health port held by another process, the database not migrated, ...) and, once the checks
pass, `worker.ready` follows; a process whose health port is taken never says it is ready.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from typing import Any

import dramatiq
import structlog
from dramatiq.middleware import Middleware

from ..launcher.spawn import die_with_parent
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
        recheck_s: float = 1.0,
    ) -> None:
        self.service = service
        self.make_server = make_server
        self.on_stop = on_stop
        self.on_boot = on_boot
        self.server: HealthServer | None = None
        self.recheck_s = recheck_s
        self._stopping = threading.Event()

    def before_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        # A worker process forked by Dramatiq's main never outlives it: SIGKILLed, the main
        # cannot forward SIGTERM, so the kernel sends it (the orphan held the health port).
        parent = multiprocessing.parent_process()
        if parent is not None and parent.pid is not None:
            die_with_parent(parent.pid)
        if self.on_boot is not None:
            self.on_boot()

    def after_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        queues = sorted(broker.get_declared_queues())
        try:
            self.server = self.make_server()
            if self.server is not None:
                self.server.start()
        except OSError as exc:
            log.error("health.bind_failed", error=str(exc))
            log.warning(
                "worker.not_ready",
                service=self.service,
                queues=queues,
                reason=f"no health server: {exc}",
            )
            UP.labels(self.service).set(1)
            return
        UP.labels(self.service).set(1)
        server = self.server
        ok, report = server.ready() if server is not None else (True, {})
        if ok:
            log.info("worker.ready", service=self.service, queues=queues)
            return
        assert server is not None
        failing = {name: state for name, state in report.items() if state != "ok"}
        log.warning("worker.not_ready", service=self.service, queues=queues, failing=failing)
        threading.Thread(
            target=self._until_ready,
            args=(server, queues),
            name="jobfleet-readiness",
            daemon=True,
        ).start()

    def _until_ready(self, server: HealthServer, queues: list[str]) -> None:
        while not self._stopping.wait(self.recheck_s):
            if server.ready()[0]:
                log.info("worker.ready", service=self.service, queues=queues)
                return

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        self._stopping.set()
        log.info("worker.stopping", service=self.service)

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        UP.labels(self.service).set(0)
        if self.server is not None:
            self.server.stop()
        self.on_stop()
        log.info("worker.stopped", service=self.service)
