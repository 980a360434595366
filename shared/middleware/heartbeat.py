"""Keeps this worker's heartbeat fresh and runs queue maintenance on a fixed period.

Dramatiq's Redis consumer only beats when it fetches, and maintenance runs on a random 0.1 % of
commands; a worker whose threads are all busy can look dead, and a dead worker's messages can
wait many minutes (1,021 s measured here). This thread calls the broker's `maintain` for every
queue each `interval_ms`: a heartbeat, plus requeueing the unacked messages of workers silent
for longer than `heartbeat_timeout_ms` (see `shared/broker/redis.py`). At boot it records which
process the heartbeat is (`shared/broker/nodes.py`: host, pid, queues, threads, lease owner),
and at shutdown that it stopped, for the console's Nodes page.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import dramatiq
import structlog
from dramatiq.middleware import Middleware

from ..broker import report_dead_consumers

log = structlog.get_logger("jobfleet.heartbeat")


class Heartbeat(Middleware):
    def __init__(
        self,
        *,
        interval_ms: int,
        nodes: tuple[Callable[[Any, Any], None], Callable[[Any], None]] | None = None,
    ) -> None:
        self.interval_s = interval_ms / 1000
        #: (on boot, on shutdown) recording this process (`nodes.recorder`), or None.
        self.nodes = nodes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def after_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        if self.nodes is not None:
            self.nodes[0](broker, worker)
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(broker,), name="jobfleet-heartbeat", daemon=True
        )
        self._thread.start()

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        """Idle consumers block for up to `consumer.IDLE_WAIT_S`: once Dramatiq has told them to
        stop (after the worker threads finished), wake them so that they stop at once."""
        consumers = list(getattr(worker, "consumers", {}).values())
        wake = getattr(broker, "wake_process", None)
        if not consumers or wake is None:
            return

        def waker() -> None:
            while any(getattr(c, "running", False) for c in consumers):
                if self._stop.wait(0.01):
                    break
            try:
                wake(len(consumers))
            except Exception as exc:  # they stop after their wait all the same
                log.warning("heartbeat.wake_failed", error=str(exc))

        threading.Thread(target=waker, name="jobfleet-stop-waker", daemon=True).start()

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        self._stop.set()
        if self.nodes is not None:
            self.nodes[1](broker)

    def _run(self, broker: Any) -> None:
        failing = False
        while not self._stop.wait(self.interval_s):
            try:
                queues = sorted(broker.get_declared_queues() | broker.get_declared_delay_queues())
                if hasattr(broker, "beat"):
                    broker.beat(queues)  # one round trip; maintenance when a worker is dead
                else:
                    for queue in queues:
                        broker.maintain(queue)
                report_dead_consumers(broker)
                if failing:
                    log.info("heartbeat.recovered")
                failing = False
            except Exception as exc:
                if not failing:
                    log.error("heartbeat.failed", error=str(exc))
                failing = True
