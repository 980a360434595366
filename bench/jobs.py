"""The no-op job, twice: a stock Dramatiq actor and a jobfleet `JobSpec` with its handler.

Both bodies do the same single Redis command per job (`record`), so the difference measured is
the machinery around the body: validation, dedup, `job_runs` tracking, the fleet middleware.

- tag "drain": INCR a counter; the increments number 1, 10 %, 90 % and N stamp their time, so
  the drain rate comes from the workers' own clock, not from a poller's resolution.
- tag "lat" / "wake": RPUSH `time.time() - sent_at`, the send-to-start latency (sent_at is taken
  by the producer just before it calls `send`, so validation and the QUEUED insert count).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

import dramatiq
import redis

from shared.contracts.base import Contract, Payload
from shared.jobs.context import JobContext
from shared.jobs.handler import BoundJob, handler
from shared.jobs.spec import JobSpec

Tag = Literal["drain", "lat", "wake"]

#: The tenant of every benchmark job.
BENCH_ORG = UUID("6be2c4a0-0000-4000-8000-00000000be4c")

BARE_QUEUE = "bench-bare"
BARE_ACTOR = "bench_noop"


class NoopV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID
    sent_at: float
    tag: Tag
    total: int = 0


NOOP = JobSpec(Contract[NoopV1]("bench:noop", (NoopV1,)), queue="bench", entity_type="bench")


@dataclass(frozen=True)
class Keys:
    """Redis keys of one system ("bare", "fleet", ...) in one run's namespace."""

    namespace: str
    system: str

    def _key(self, name: str) -> str:
        return f"{self.namespace}:bench:{self.system}:{name}"

    @property
    def count(self) -> str:
        return self._key("count")

    @property
    def stamps(self) -> str:
        return self._key("stamps")

    def samples(self, tag: str) -> str:
        return self._key(f"samples:{tag}")


def marks(total: int) -> dict[int, str]:
    """Which increments stamp their time: first, 10 %, 90 %, last."""
    if total <= 0:
        return {}
    return {
        1: "first",
        max(1, math.ceil(0.1 * total)): "p10",
        max(1, math.ceil(0.9 * total)): "p90",
        total: "last",
    }


def record(client: redis.Redis, keys: Keys, tag: str, sent_at: float, total: int) -> None:
    now = time.time()
    if tag != "drain":
        client.rpush(keys.samples(tag), now - sent_at)
        return
    n = int(client.incr(keys.count))
    label = marks(total).get(n)
    if label is not None:
        client.hset(keys.stamps, label, repr(now))


def declare_bare(broker: dramatiq.Broker, namespace: str) -> dramatiq.Actor[Any, Any]:
    """The stock actor: positional args, the broker's own Redis client for the record."""
    keys = Keys(namespace, "bare")
    client: redis.Redis = broker.client  # type: ignore[attr-defined]

    @dramatiq.actor(broker=broker, actor_name=BARE_ACTOR, queue_name=BARE_QUEUE)
    def bench_noop(sent_at: float, tag: str, total: int) -> None:
        record(client, keys, tag, sent_at, total)

    return bench_noop


def bind_fleet(broker: dramatiq.Broker, namespace: str) -> BoundJob[NoopV1]:
    keys = Keys(namespace, "fleet")
    client: redis.Redis = broker.client  # type: ignore[attr-defined]

    @handler(NOOP, broker=broker)
    def bench_noop(payload: NoopV1, job: JobContext) -> None:
        record(client, keys, payload.tag, payload.sent_at, payload.total)

    return bench_noop
