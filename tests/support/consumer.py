"""Driving a fleet consumer by hand in a test (shared/broker/consumer.py)."""

from __future__ import annotations

import time
from typing import Any


def fetch_one(consumer: Any, timeout: float = 5.0) -> Any:
    """The next message `consumer` hands out (a `MessageProxy`), polling it for `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = next(consumer)
        if message is not None:
            return message
    raise AssertionError("no message fetched")


def unacked(broker: Any, queue: str) -> int:
    """Messages of `queue` in this broker's (worker's) unacknowledged set."""
    return int(broker.client.scard(f"{broker.namespace}:__acks__.{broker.broker_id}.{queue}"))
