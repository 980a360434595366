"""Tracking store (Postgres) down: a send fails loudly and enqueues nothing (DESIGN §3).

Dramatiq swallows plain exceptions raised by middleware hooks, so a dedup or tracking check
inside `before_enqueue` would let an untracked job through silently; these tests pin that the
checks happen before the broker is called and that no fleet middleware hooks `before_enqueue`.
"""

from __future__ import annotations

import uuid

import dramatiq
import pytest

from shared.bootstrap import worker_broker
from shared.config import Settings
from shared.errors import TrackingUnavailable
from shared.runtime import Runtime
from tests.support.jobs import ECHO, bind
from tests.support.procs import free_port

#: Nothing listens there: connections are refused at once.
DEAD_PG = "postgresql+psycopg://postgres@127.0.0.1:{port}/jobfleet"


def _keys(runtime: Runtime) -> list[bytes]:
    return list(runtime.broker.client.scan_iter(f"{runtime.settings.broker_namespace}:*"))


@pytest.fixture
def pg_down(settings: Settings) -> Settings:
    return settings.model_copy(update={"database_url": DEAD_PG.format(port=free_port())})


def _echo() -> dict[str, str]:
    return {"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()), "message": "untracked"}


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_a_send_with_the_tracking_store_down_raises_and_enqueues_nothing(runtime, pg_down) -> None:
    """A worker's broker (every fleet middleware on it; workers send too): nothing gets through."""
    broker = worker_broker(pg_down, "test")
    bind(broker)
    producer = Runtime(pg_down, broker=broker)
    try:
        for _ in range(2):  # the first send after the outage began, and the next one
            with pytest.raises(TrackingUnavailable):
                producer.sender.send(ECHO, _echo())
    finally:
        producer.close()
    assert _keys(runtime) == []


def test_no_fleet_middleware_does_its_checks_in_before_enqueue(settings: Settings) -> None:
    broker = worker_broker(settings, "test")
    hooked = [
        type(m).__name__
        for m in broker.middleware
        if type(m).__module__.startswith("shared.")
        and type(m).before_enqueue is not dramatiq.Middleware.before_enqueue
    ]
    assert hooked == [], "checks in before_enqueue are swallowed by Dramatiq (DESIGN §3)"
