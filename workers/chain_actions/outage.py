"""An EVM node that does not answer is an outage, not the action's fault (DESIGN §3).

A job that meets one (`RpcUnavailable`: connection refused or reset, timeout, HTTP 5xx/429)
comes back later without spending an attempt (`RetryLater`) on the kernel's outage window
(`shared/outage.py`); once the window is over it is DEAD with `NODE_UNAVAILABLE` and the last
error. Where the outage of one job began is kept in Redis
(`{namespace}:chain:outage:{job_id}`, a hash with `since` and `tries`, expiring after the
window), because the node may be down before anything of the job reached the database; it is
cleared when the job ends any other way.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from chain.settings import ChainSettings
from shared.errors import FleetError, PermanentError, RetryLater
from shared.outage import OutageWindow

log = structlog.get_logger("jobfleet.chain.outage")


class NodeOutage(RetryLater):
    """The EVM node did not answer; the action comes back later without using an attempt."""

    code = "NODE_OUTAGE"


@dataclass(frozen=True)
class OutagePolicy(OutageWindow):
    """The chain's outage window (`CHAIN_OUTAGE_*` settings)."""

    min_s: float = 1.0
    max_s: float = 30.0
    window_s: float = 3_600.0

    @classmethod
    def from_settings(cls, settings: ChainSettings) -> OutagePolicy:
        return cls(
            min_s=settings.outage_retry_min_s,
            max_s=settings.outage_retry_max_s,
            window_s=settings.outage_window_s,
        )


class Outages:
    def __init__(
        self,
        redis: Any,
        namespace: str,
        policy: OutagePolicy,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.redis = redis
        self.namespace = namespace
        self.policy = policy
        self._clock = clock
        self._rng = rng or random.Random()

    def key(self, job_id: str) -> str:
        return f"{self.namespace}:chain:outage:{job_id}"

    def failed(self, job_id: str, error: Exception) -> FleetError:
        """What to raise for `error`: `NodeOutage` within the window, `PermanentError` after."""
        key, now = self.key(job_id), self._clock()
        ttl_ms = int(self.policy.window_s * 2_000) + 60_000
        try:
            pipe = self.redis.pipeline()
            pipe.hsetnx(key, "since", repr(now))
            pipe.hincrby(key, "tries", 1)
            pipe.hget(key, "since")
            pipe.pexpire(key, ttl_ms)
            _, tries, since, _ = pipe.execute()
        except Exception as exc:  # Redis down as well: an ordinary retry, attempt counted
            log.warning("chain.outage_not_recorded", job_id=job_id, error=type(exc).__name__)
            return error if isinstance(error, FleetError) else FleetError(str(error))
        elapsed = now - float(since)
        if elapsed >= self.policy.window_s:
            self.clear(job_id)
            return PermanentError(
                f"EVM node unavailable for {elapsed:.0f}s ({tries} tries; outage window"
                f" {self.policy.window_s:.0f}s): {error}",
                code="NODE_UNAVAILABLE",
            )
        delay = min(self.policy.delay_s(int(tries), self._rng), self.policy.window_s - elapsed)
        return NodeOutage(
            f"EVM node unavailable for {elapsed:.0f}s (try {tries}; retried for up to"
            f" {self.policy.window_s:.0f}s): {error}",
            delay_ms=max(1, int(delay * 1000)),
        )

    def clear(self, job_id: str) -> None:
        with contextlib.suppress(Exception):  # it expires after the window anyway
            self.redis.delete(self.key(job_id))
