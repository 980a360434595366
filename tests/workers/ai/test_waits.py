"""The limiter's and the meter's waits: a lost token counter is seeded again from the durable
record before reserving (three tries at most); a follow-up call of a task over its org's request
rate waits in place for the slot, while a first call is delayed instead (`RetryLater`)."""

from __future__ import annotations

import random
import uuid
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from shared.errors import RetryLater
from shared.runtime import Runtime
from workers.ai.limits import Limiter, OrgLimits, QuotaExceeded, Reservation
from workers.ai.meter import Meter
from workers.ai.settings import AiSettings
from workers.ai.store import TaskRow
from workers.ai.wiring import Ai

DAY = date(2026, 12, 1)
LIMITS = OrgLimits(requests_per_window=10, window_ms=2_000, tokens_per_day=150)


def test_a_lost_token_counter_is_seeded_from_the_record_then_reserved(runtime: Runtime) -> None:
    org = uuid.uuid4()
    seeded: list[tuple[uuid.UUID, date]] = []

    def seed(org_id: uuid.UUID, day: date) -> int:
        seeded.append((org_id, day))
        return 100

    limiter = Limiter(runtime.broker.client, runtime.settings.broker_namespace, seed)

    reservation = limiter.reserve_tokens(org, DAY, 40, LIMITS)

    assert seeded == [(org, DAY)] and reservation.tokens == 40
    assert limiter.used_today(org, DAY) == 140
    with pytest.raises(QuotaExceeded):
        limiter.reserve_tokens(org, DAY, 20, LIMITS)  # 160 > 150: the counter is there now
    assert seeded == [(org, DAY)]


class CounterNeverThere:
    """A Redis whose token counter is gone again at every try."""

    def __init__(self) -> None:
        self.sets: list[tuple[str, int]] = []

    def register_script(self, source: str) -> Any:
        return lambda keys, args: [-1, 0]

    def set(self, key: str, value: int, **options: Any) -> None:
        self.sets.append((key, value))


def test_a_token_counter_that_cannot_be_seeded_fails_after_three_tries() -> None:
    org = uuid.uuid4()
    client = CounterNeverThere()
    limiter = Limiter(client, "ns", lambda org_id, day: 7)

    with pytest.raises(RuntimeError, match="could not be seeded"):
        limiter.reserve_tokens(org, DAY, 40, LIMITS)

    assert client.sets == [(f"ns:ai:tokens:{org}:{DAY.isoformat()}", 7)] * 3


class ScriptedLimiter:
    """`acquire_request` answers the waits given (0: a slot is free); tokens always fit."""

    def __init__(self, *waits_ms: int) -> None:
        self.waits = list(waits_ms)

    def acquire_request(self, org_id: uuid.UUID, limits: OrgLimits) -> int:
        return self.waits.pop(0)

    def reserve_tokens(
        self, org_id: uuid.UUID, day: date, tokens: int, limits: OrgLimits
    ) -> Reservation:
        return Reservation("tokens", tokens)


def meter(limiter: ScriptedLimiter, sleeps: list[float]) -> Meter:
    ai = Ai(settings=AiSettings(), pool=None, limiter=limiter, sleep=sleeps.append)  # type: ignore[arg-type]
    row = TaskRow(
        id=uuid.uuid4(), org_id=uuid.uuid4(), task="extract", input="text", params={},
        status="RUNNING", result=None, provider=None, model=None, calls=0, tokens_in=0,
        tokens_out=0, cost=Decimal(0), error_code=None, attempts=1, deferrals=0,
        lease_until=None, finished_at=None,
    )  # fmt: skip
    return Meter(ai, row, rng=random.Random(7))


def test_a_follow_up_call_over_the_rate_waits_in_place_for_its_slot() -> None:
    sleeps: list[float] = []
    m = meter(ScriptedLimiter(0, 250, 40, 0), sleeps)
    m._admit(10)  # the first call: a slot is free

    reservation = m._admit(10)  # the repair call: 250 ms, then 40 ms, then a slot

    assert sleeps == [0.25, 0.04] and reservation.tokens == 10 and m.calls == 2


def test_a_first_call_over_the_rate_is_delayed_not_waited_for() -> None:
    sleeps: list[float] = []
    m = meter(ScriptedLimiter(250), sleeps)

    with pytest.raises(RetryLater) as delayed:
        m._admit(10)

    assert sleeps == [] and m.calls == 0
    assert 250 <= delayed.value.delay_ms <= 250 + 1_000  # the wait plus up to 1 s of jitter
