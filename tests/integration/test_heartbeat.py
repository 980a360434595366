"""Declaring workers dead (shared/broker/redis.py): a real death is detected, a shared outage is not.

Two brokers stand for two worker processes on one Redis; their heartbeats and unacked sets are
Dramatiq's own, driven by the fleet's `maintain` (the heartbeat middleware calls it every
second)."""

from __future__ import annotations

import time

import pytest
from dramatiq.common import current_millis

from shared.broker import FleetRedisBroker, build_broker
from tests.support.jobs import raw_message
from tests.support.queues import queued

SILENT_S = 10.0  # longer than the 5 s heartbeat timeout


def _worker_holding_a_message(settings) -> FleetRedisBroker:
    broker = build_broker(settings)
    broker.declare_queue("testq")
    broker.enqueue(raw_message("test:echo", {}))
    consumer = broker.consume("testq", prefetch=1, timeout=50)
    deadline = time.monotonic() + 5
    while next(consumer) is None:
        assert time.monotonic() < deadline, "no message fetched"
    return broker


def _unacked(broker: FleetRedisBroker) -> int:
    return int(broker.client.scard(f"{broker.namespace}:__acks__.{broker.broker_id}.testq"))


def _queued(broker: FleetRedisBroker) -> int:
    return int(queued(broker.client, broker.namespace, "testq"))


def _silence(broker: FleetRedisBroker, seconds: float) -> None:
    """As if Redis last heard from `broker` `seconds` ago."""
    broker.client.zadd(
        f"{broker.namespace}:__heartbeats__",
        {broker.broker_id: current_millis() - int(seconds * 1000)},
    )


def test_a_silent_worker_is_dead_and_its_messages_run_elsewhere(runtime, settings) -> None:
    busy = _worker_holding_a_message(settings)
    other = build_broker(settings)
    other.maintain("testq")
    _silence(busy, SILENT_S)

    other.maintain("testq")

    assert _unacked(busy) == 0 and _queued(busy) == 1


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_after_a_shared_outage_a_worker_does_not_declare_the_others_dead(runtime, settings) -> None:
    """Everyone lost Redis together: the others' beats are as old as ours. Requeueing their
    in-flight messages then would run those jobs twice, at the same time. In real time, with a
    2 s heartbeat timeout."""
    settings = settings.model_copy(update={"heartbeat_timeout_ms": 2_000})
    busy = _worker_holding_a_message(settings)
    other = build_broker(settings)
    busy.maintain("testq")
    other.maintain("testq")

    time.sleep(2.5)  # an outage: no beat from anyone for longer than the timeout
    other.maintain("testq")  # Redis is back: it beats, declares no one dead
    assert _unacked(busy) == 1 and _queued(busy) == 0

    for _ in range(5):  # both beat for longer than a heartbeat timeout
        busy.maintain("testq")
        other.maintain("testq")
        time.sleep(0.5)
    assert _unacked(busy) == 1 and _queued(busy) == 0

    for _ in range(6):  # the busy worker goes silent; the other keeps beating
        time.sleep(0.5)
        other.maintain("testq")
    assert _unacked(busy) == 0 and _queued(busy) == 1  # a real death is still detected
