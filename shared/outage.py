"""The outage window (DESIGN §3): a dependency that does not answer is not the job's fault.

A job that meets an outage of what it depends on (a node, a server, a provider) comes back later
without spending an attempt: after `min_s`, then twice as long each time up to `max_s`, with up
to 25 % jitter so that the jobs held back by one outage do not all come back at once, until
`window_s` after the first failure; then it is dead with the reason. Each domain keeps where its
outage began (in Redis, or on the job's own row) and sets its own figures.

`OutageLog` is what the log says of one: a line when it begins, one every 30 s while it lasts,
one when it ends (the workers' paused fetching while Postgres is down, the scheduler's jobs
while their dependency is).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class OutageWindow:
    min_s: float
    max_s: float
    window_s: float

    def delay_s(self, tries: int, rng: random.Random) -> float:
        """The wait after the `tries`-th failure in a row (1 for the first)."""
        base: float = min(self.max_s, self.min_s * 2.0 ** max(0, tries - 1))
        return min(self.max_s, base + rng.uniform(0, base * 0.25))

    def expired(self, since: datetime, now: datetime) -> bool:
        """The window, counted from the first failure, is over."""
        return (now - since).total_seconds() >= self.window_s


#: Least time between two "still down" lines of one outage.
LOG_EVERY_S = 30.0


class OutageLog:
    """What the log says of a dependency that stops answering: one line when the outage begins,
    one every `every_s` while it lasts (with how many failures it held), one when it answers
    again, instead of a line and a traceback per failed try (a 5 min outage wrote 101
    tracebacks of one periodic job). Thread-safe; `clock` is monotonic seconds."""

    def __init__(
        self,
        logger: Any,
        *,
        down_event: str,
        up_event: str,
        every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.down_event, self.up_event = down_event, up_event
        self.every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None  # when the outage began (None: no outage)
        self._said_at = 0.0
        self._failures = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, *, say: bool = True, **fields: Any) -> None:
        """A try failed for the outage: logged (warning) if it begins one or `every_s` passed
        since the last line; `say=False` counts it as said (another line said it already)."""
        with self._lock:
            now = self._clock()
            self._failures += 1
            first = self._since is None
            if first:
                self._since = now
            elif now - self._said_at < self.every_s:
                return
            self._said_at = now
            failures = self._failures
            since = self._since
        if say:
            assert since is not None
            self._log.warning(
                self.down_event,
                outage="began" if first else "goes on",
                down_s=round(now - since, 1),
                failures=failures,
                **fields,
            )

    def answered(self, **fields: Any) -> None:
        """A try succeeded: one line if an outage was under way, with how long it lasted."""
        if self._since is None:  # cheap when all is well
            return
        with self._lock:
            since, failures = self._since, self._failures
            if since is None:
                return
            self._since, self._failures = None, 0
        self._log.warning(
            self.up_event, down_s=round(self._clock() - since, 1), failures=failures, **fields
        )
