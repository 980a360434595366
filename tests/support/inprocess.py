"""In-process workers for tests: the fleet's worker middleware on real Redis and Postgres.

`InProcessWorker` builds the broker, binds a domain's handlers and installs nothing globally;
`started_workers` starts them with their runtime installed (so `.send()` goes to that broker)
and stops them and restores the previous runtime at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import dramatiq

from shared.config import Settings
from shared.runtime import Runtime, set_runtime


class InProcessWorker:
    def __init__(
        self,
        settings: Settings,
        *,
        service: str,
        bind: Callable[[dramatiq.Broker], Any],
        queues: Iterable[str] | None = None,
        threads: int = 4,
    ) -> None:
        from shared.bootstrap import worker_broker

        self.settings = settings
        self.broker = worker_broker(settings, service)
        self.jobs = bind(self.broker)
        self.runtime = Runtime(settings, broker=self.broker)
        self.worker = dramatiq.Worker(
            self.broker,
            queues=set(queues) if queues is not None else None,
            worker_threads=threads,
            worker_timeout=50,
        )

    def stop(self) -> None:
        self.worker.stop()
        self.runtime.close()


W = TypeVar("W", bound=InProcessWorker)


@contextmanager
def started_workers(
    *,
    install: Callable[[Any], None] = lambda worker: None,
    uninstall: Callable[[], None] = lambda: None,
) -> Iterator[Callable[[W], W]]:
    """Yield `start(worker)`: installs its runtime (and `install(worker)`), starts it. On exit
    every started worker stops, `uninstall()` runs and the first previous runtime is back."""
    started: list[InProcessWorker] = []
    previous: list[Runtime | None] = []

    def start(worker: W) -> W:
        previous.append(set_runtime(worker.runtime))
        install(worker)
        worker.worker.start()
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.stop()
        uninstall()
        if previous:
            set_runtime(previous[0])
