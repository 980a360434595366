"""Whether a worker process may take work: its run store answers and is migrated.

A worker that cannot record the start of a run hands the message back (no attempt counted).
Before this, while Postgres was down, every consumer kept fetching, failing and handing back
every 3 s, writing thousands of tracebacks (5,956 errors in 45 s). Now the consumers ask the
watch before they fetch: once a write of the run writer has failed (or before the first
check), the watch probes the store at most every `probe_every_s` and says "wait" until it
answers. Fetching resumes by itself; the log has one line when fetching pauses, one every
`log_every_s` while it stays paused, and one when it resumes. An unmigrated database is said
once ("database not migrated: run `fleet db upgrade`"), and fetching starts when it is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from ..errors import SchemaNotMigrated
from ..outage import LOG_EVERY_S, OutageLog

log = structlog.get_logger("jobfleet.run_store")

#: Least time between two probes of an unusable store (shared by every consumer of a process).
PROBE_EVERY_S = 1.0


class RunStoreWatch:
    def __init__(
        self,
        probe: Callable[[], None],
        failed_at: Callable[[], float],
        *,
        probe_every_s: float = PROBE_EVERY_S,
        log_every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`probe` raises unless the store answers and is migrated; `failed_at` is the
        `clock()` time of the run writer's last failed write (0 when none)."""
        self._probe = probe
        self._failed_at = failed_at
        self.probe_every_s = probe_every_s
        self._clock = clock
        # "fetching paused" once, every `log_every_s` while it lasts, "resumed" at the end.
        self._outage = OutageLog(
            log,
            down_event="consumer.fetch_paused",
            up_event="consumer.fetch_resumed",
            every_s=log_every_s,
            clock=clock,
        )
        self._lock = threading.Lock()
        self._ok_at: float | None = None  # when the last probe succeeded (None: not usable)
        self._next_probe = 0.0
        self._said_not_migrated = False
        self.reason: str | None = None

    def usable(self) -> bool:
        """True when consumers may fetch; probes the store when that is in doubt (cheap when
        all is well: two attribute reads and a comparison)."""
        ok_at = self._ok_at
        if ok_at is not None and self._failed_at() <= ok_at:
            return True
        with self._lock:
            now = self._clock()
            if self._ok_at is not None and self._failed_at() <= self._ok_at:
                return True
            if now < self._next_probe:
                return False
            self._next_probe = now + self.probe_every_s
            try:
                self._probe()
            except SchemaNotMigrated as exc:
                self._down(now, str(exc), not_migrated=True)
                return False
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                self._down(now, first, not_migrated=False)
                return False
            self._outage.answered(reason="the run store answers again")
            self._ok_at, self.reason = now, None
            self._said_not_migrated = False
            return True

    def wait(self, timeout: float) -> None:
        """Sleep until the next probe is due, at most `timeout` seconds."""
        time.sleep(max(0.0, min(timeout, self._next_probe - self._clock())))

    def _down(self, now: float, reason: str, *, not_migrated: bool) -> None:
        self._ok_at, self.reason = None, reason
        if not_migrated:
            if not self._said_not_migrated:
                self._said_not_migrated = True
                log.error("worker.database_not_migrated", error=reason)
            self._outage.failed(say=False)
            return
        self._outage.failed(
            reason="the run store (Postgres) cannot be reached",
            error=reason,
            retry_every_s=self.probe_every_s,
        )
