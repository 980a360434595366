"""The fleet's Dramatiq broker on Redis: the only package that touches Dramatiq's internals.

`redis.py` (the broker: heartbeats, maintenance, wake-ups), `consumer.py` (the consumer:
fetch with Redis ids, wake-up, back-pressure), `acker.py` (acknowledgements once an outcome is
durable), `gate.py` (atomic dedup + enqueue), `lanes.py` (fair share between orgs, priorities,
concurrency limits), `delivery.py` (the per-delivery state), the Lua
scripts in `lua/` (loaded by `scripts.py`, which puts their shared parts in place), and `version.py`: the Dramatiq minor they were written against, checked at
import.
"""

from __future__ import annotations

# First: refuse another Dramatiq minor before anything imports its private parts.
from .version import SUPPORTED_DRAMATIQ, check_dramatiq_version

# isort: split
from .acker import Acker
from .consumer import (
    FleetRedisConsumer,
    consumers_check,
    dead_consumers,
    dead_consumers_key,
    report_dead_consumers,
    wake_key,
)
from .delivery import Delivery, delivery_of, failure_of, is_delivery, message_of
from .gate import EnqueueGate, dedup_key
from .redis import FleetRedisBroker, build_broker

__all__ = [
    "SUPPORTED_DRAMATIQ",
    "Acker",
    "Delivery",
    "EnqueueGate",
    "FleetRedisBroker",
    "FleetRedisConsumer",
    "build_broker",
    "check_dramatiq_version",
    "consumers_check",
    "dead_consumers",
    "dead_consumers_key",
    "dedup_key",
    "delivery_of",
    "failure_of",
    "is_delivery",
    "message_of",
    "report_dead_consumers",
    "wake_key",
]
