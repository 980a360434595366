"""Per-org AI limits shared by every worker process, kept in Redis.

- Requests per minute: a sliding window (a sorted set of call times, Redis's own clock, so
  processes on several hosts agree). Over it, the caller gets the wait until a slot frees up
  and the job is delayed (`RetryLater`, not an attempt).
- Tokens per UTC day: a counter per org and day. Before a call the worst case (input estimate +
  max output tokens) is reserved atomically; over the cap the task fails `QUOTA_EXCEEDED`.
  After the call the reservation is settled to the tokens the provider reported (or released
  when the call failed without usage). When Redis lost the counter (restart, eviction) it is
  seeded again from `ai_usage`, the durable record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any
from uuid import UUID

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from .settings import AiSettings

_WINDOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""

_RESERVE = """
local used = redis.call('GET', KEYS[1])
if not used then return {-1, 0} end
used = tonumber(used)
if used + tonumber(ARGV[2]) > tonumber(ARGV[1]) then return {0, used} end
local total = redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1, total}
"""

#: A day counter outlives its day by this much (late settlements still find it).
DAY_TTL_S = 2 * 86_400


@dataclass(frozen=True)
class OrgLimits:
    requests_per_window: int
    window_ms: int
    tokens_per_day: int


def limits_for(settings: AiSettings, org_id: UUID) -> OrgLimits:
    override = settings.org_limits.get(str(org_id), {})
    return OrgLimits(
        requests_per_window=int(override.get("requests_per_minute", settings.requests_per_minute)),
        window_ms=settings.rate_window_ms,
        tokens_per_day=int(override.get("tokens_per_day", settings.tokens_per_day)),
    )


@dataclass(frozen=True)
class Reservation:
    key: str
    tokens: int


class QuotaExceeded(Exception):
    def __init__(self, used: int, cap: int, wanted: int) -> None:
        super().__init__(f"{used} of {cap} tokens used today; this call may need {wanted}")
        self.used, self.cap, self.wanted = used, cap, wanted


class CounterMissing(Exception):
    """The day's token counter is not in Redis (restart, eviction, a new day)."""


class Limiter:
    """Both limits for every org; `seed(org_id, day)` reads the day's total from `ai_usage`."""

    def __init__(self, client: Any, namespace: str, seed: Callable[[UUID, date], int]) -> None:
        self.client = client
        self.prefix = f"{namespace}:ai"
        self.seed = seed
        self._window = client.register_script(_WINDOW)
        self._reserve = client.register_script(_RESERVE)

    def acquire_request(self, org_id: UUID, limits: OrgLimits) -> int:
        """Take a request slot: 0 when taken, else the milliseconds until one frees up."""
        member = uuid.uuid4().hex
        return int(
            self._window(
                keys=[f"{self.prefix}:rpm:{org_id}"],
                args=[limits.requests_per_window, limits.window_ms, member],
            )
        )

    def reserve_tokens(
        self, org_id: UUID, day: date, tokens: int, limits: OrgLimits
    ) -> Reservation:
        """Reserve `tokens` of the org's day; raises `QuotaExceeded` when they do not fit.

        A missing counter (Redis lost it) is seeded from the durable record (first writer
        wins) and the reservation tried again, three tries in all."""
        key = f"{self.prefix}:tokens:{org_id}:{day.isoformat()}"

        def seed(_: RetryCallState) -> None:
            self.client.set(key, self.seed(org_id, day), nx=True, ex=DAY_TTL_S)

        def unseeded(_: RetryCallState) -> Reservation:
            raise RuntimeError(f"token counter {key} could not be seeded")

        tries = Retrying(
            retry=retry_if_exception_type(CounterMissing),
            stop=stop_after_attempt(3),
            after=seed,
            retry_error_callback=unseeded,
        )
        return tries(self._try_reserve, key, tokens, limits)

    def _try_reserve(self, key: str, tokens: int, limits: OrgLimits) -> Reservation:
        """The reservation, or `QuotaExceeded`, or `CounterMissing`."""
        status, used = self._reserve(keys=[key], args=[limits.tokens_per_day, tokens, DAY_TTL_S])
        if status == 1:
            return Reservation(key, tokens)
        if status == 0:
            raise QuotaExceeded(int(used), limits.tokens_per_day, tokens)
        raise CounterMissing(key)

    def settle(self, reservation: Reservation, used_tokens: int) -> None:
        """Replace the reservation by what the call really used (0: release it)."""
        delta = used_tokens - reservation.tokens
        if delta:
            self.client.incrby(reservation.key, delta)

    def used_today(self, org_id: UUID, day: date) -> int:
        value = self.client.get(f"{self.prefix}:tokens:{org_id}:{day.isoformat()}")
        return int(value or 0)
