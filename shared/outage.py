"""The outage window (DESIGN §3): a dependency that does not answer is not the job's fault.

A job that meets an outage of what it depends on (for example the EVM node, the SMTP server) comes back later
without spending an attempt: after `min_s`, then twice as long each time up to `max_s`, with up
to 25 % jitter so that the jobs held back by one outage do not all come back at once, until
`window_s` after the first failure; then it is dead with the reason. Each domain keeps where its
outage began (for example the chain in Redis, email on its row) and sets its own figures.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime


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
