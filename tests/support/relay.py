"""The outbox relay (the scheduler's job in production) on a thread of the test's process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from shared import outbox
from shared.config import Settings
from shared.runtime import Runtime


@contextmanager
def relaying(settings: Settings) -> Iterator[None]:
    """The outbox relay (the scheduler's job in production) on a thread of this process."""
    runtime = Runtime(settings)
    stop = threading.Event()
    thread = threading.Thread(
        target=outbox.run_relay, args=(runtime, stop), kwargs={"interval_s": 0.1}
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
        runtime.close()
