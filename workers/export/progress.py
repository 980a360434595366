"""Progress of one export: `{done, total}` reported every `total / steps` rows (at least every
5 %), each report also the cancellation check (`JobContext.progress` raises `JobCanceled`).
Rows are fetched in batches no larger than one interval, so a report is never late by more
than one batch and a cancel is honoured within one interval.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Report = Callable[[int, int, Any], None]


class Progress:
    def __init__(self, total: int, steps: int, report: Report) -> None:
        self.total = total
        self.interval = max(1, -(-total // steps))
        self.done = 0
        self._next = self.interval
        self._report = report
        self.reports = 0

    def batch_size(self, fetch: int) -> int:
        return max(1, min(fetch, self.interval))

    def track(self, batches: Iterator[list[Any]]) -> Iterator[list[Any]]:
        """Pass the batches through, reporting once each interval is written."""
        for batch in batches:
            yield batch  # the consumer writes it before asking for the next one
            self.done += len(batch)
            if self.done >= self._next:
                self._next = (self.done // self.interval + 1) * self.interval
                self.report()

    def report(self, checkpoint: Any = None) -> None:
        self.reports += 1
        self._report(self.done, self.total, checkpoint)

    def save(self, checkpoint: dict[str, Any]) -> None:
        """Record a checkpoint now (durably), with the current progress."""
        self.report(checkpoint)
