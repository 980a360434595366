"""Fair share, priorities and concurrency limits at the fetch (shared/broker/lanes.py), on real
Redis: what one fetch after another takes, deterministically, without worker processes
(tests/integration/test_fair_share.py runs them across processes)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from shared import outbox
from shared.broker import build_broker, codec, lanes
from shared.broker.consumer import fetch
from shared.broker.redis import FleetRedisBroker
from shared.config import Settings
from shared.errors import UnknownPriority
from shared.jobs import catalog
from shared.jobs.message import build_message
from shared.limits import InvalidLimit, queue_limits, set_limit
from shared.runtime import Runtime
from tests.support.jobs import ECHO
from tests.support.queues import queued

V1_SCRIPT = Path(__file__).resolve().parents[1] / "wire" / "enqueue_once_v1.lua"


@pytest.fixture
def worker(settings: Settings, runtime: Runtime) -> Iterator[FleetRedisBroker]:
    """A second broker: a worker of its own (its own broker id), as another process has."""
    broker = build_broker(settings)
    yield broker
    broker.client.close()


def _send(org: str, text: str, **kw: Any) -> str:
    return ECHO.send({"org_id": org, "entity_id": str(uuid.uuid4()), "message": text}, **kw).job_id


def _take(broker: FleetRedisBroker, count: int = 1) -> list[tuple[str, str, str]]:
    """(redis id, org, message text) of what one fetch takes."""
    out = []
    for redis_id, data in fetch(broker, "testq", count):
        message = codec.decode(data)
        out.append((redis_id, message.options["org_id"], message.args[0]["message"]))
    return out


def test_a_small_orgs_job_is_taken_within_two_picks_of_a_large_orgs_backlog(
    runtime: Runtime, worker: FleetRedisBroker
) -> None:
    big, small = str(uuid.uuid4()), str(uuid.uuid4())
    for i in range(1_000):
        _send(big, f"a{i}")
    assert [text for _, _, text in _take(worker, 3)] == ["a0", "a1", "a2"]
    _send(small, "b")
    # Bound: one pick of each other org with work in the same priority, then B's.
    taken = [text for _, _, text in _take(worker, 1) + _take(worker, 1)]
    assert "b" in taken, taken
    assert queued(runtime.broker.client, runtime.settings.broker_namespace, "testq") == 996


def test_a_high_job_behind_5000_low_ones_is_taken_next_and_low_is_not_starved(
    runtime: Runtime, worker: FleetRedisBroker
) -> None:
    org = str(uuid.uuid4())
    for i in range(5_000):
        _send(org, f"low{i}", priority="low")
    _send(org, "high", priority="high")
    assert [text for _, _, text in _take(worker, 1)] == ["high"]
    # A flood of high jobs: low still gets its turn, one pick in ten.
    for i in range(30):
        _send(str(uuid.uuid4()), f"high{i}", priority="high")
    texts = [text for _, _, text in _take(worker, 20)]
    assert sum(t.startswith("low") for t in texts) == 2, texts


def test_a_job_over_its_orgs_limit_waits_unfetched_and_goes_when_a_slot_frees(
    runtime: Runtime, worker: FleetRedisBroker, settings: Settings
) -> None:
    capped, other = str(uuid.uuid4()), str(uuid.uuid4())
    set_limit(
        runtime, "testq", 2, org=uuid.UUID(capped), by="test", reason="noisy", known=["testq"]
    )
    for i in range(5):
        _send(capped, f"c{i}")
    _send(other, "o0")
    taken = _take(worker, 10)
    assert sorted(text for _, _, text in taken) == ["c0", "c1", "o0"]
    assert _take(worker, 10) == [], "over the limit: nothing more of that org is taken"
    limits = queue_limits(worker.client, settings, "testq")
    assert limits.orgs == {capped: 2} and limits.running_by_org[capped] == 2
    # An acknowledgement frees a slot (lua/ack_many.lua, via the acker; here Dramatiq's ack).
    first = next(redis_id for redis_id, org, _ in taken if org == capped)
    worker.do_ack("testq", first)
    assert [text for _, _, text in _take(worker, 10)] == ["c2"]
    # A requeue (a paused queue's hand-back, a shutdown) frees its slot too; the message goes
    # back and is taken again within the limit.
    second = next(r for r, org, text in taken if org == capped and r != first)
    worker.do_requeue("testq", second)
    assert [text for _, _, text in _take(worker, 10)] == ["c1"]


def test_a_queue_limit_caps_running_jobs_over_every_worker(
    runtime: Runtime, worker: FleetRedisBroker
) -> None:
    set_limit(runtime, "testq", 3, by="test", reason="", known=["testq"])
    for i in range(6):
        _send(str(uuid.uuid4()), f"j{i}")
    assert len(_take(worker, 2)) == 2
    assert len(_take(runtime.broker, 10)) == 1, "another worker gets what the limit leaves"
    assert _take(worker, 10) == []
    set_limit(runtime, "testq", None, by="test", reason="incident over", known=["testq"])
    assert len(_take(worker, 10)) == 3


def test_a_dead_workers_slots_are_released_with_its_messages(
    runtime: Runtime, worker: FleetRedisBroker, settings: Settings
) -> None:
    org = str(uuid.uuid4())
    set_limit(runtime, "testq", 1, per_org=True, by="test", reason="", known=["testq"])
    _send(org, "x")
    _send(org, "y")
    assert [text for _, _, text in _take(worker, 5)] == ["x"]
    assert _take(runtime.broker, 5) == []
    # The worker dies: its heartbeat ages past the timeout (as a SIGKILL leaves it).
    worker.client.zadd(f"{worker.namespace}:__heartbeats__", {worker.broker_id: 1})
    runtime.broker.beat(["testq"])
    texts = sorted(text for _, _, text in _take(runtime.broker, 5))
    assert texts == ["x"] or texts == ["y"], texts
    assert queue_limits(runtime.broker.client, settings, "testq").running == 1


def test_a_message_sent_with_the_earlier_script_lands_in_the_default_lane_and_is_taken(
    runtime: Runtime, worker: FleetRedisBroker
) -> None:
    """A producer written against the earlier wire protocol (4 arguments, no lane) keeps
    working: its message waits in the queue's own list, served as one more lane."""
    ns = runtime.settings.broker_namespace
    org = str(uuid.uuid4())
    message = build_message(
        job_name="test:echo",
        queue="testq",
        payload={"v": 2, "org_id": org, "entity_id": str(uuid.uuid4()), "message": "old"},
        job_id="raw-old",
        org_id=org,
        entity_type=None,
        entity_id=None,
        request_id=None,
    )
    options = {k: v for k, v in message.options.items() if k != "priority"}
    data = message.copy(options=options).encode()
    client = runtime.broker.client
    client.eval(
        V1_SCRIPT.read_text(), 4,
        f"{ns}:jobfleet:job-id:raw-old", f"{ns}:testq.msgs", f"{ns}:testq", f"{ns}:testq.wake",
        message.message_id, 60_000, "old-redis-id", data,
    )  # fmt: skip
    assert client.llen(f"{ns}:testq") == 1
    _send(org, "new")
    assert sorted(text for _, _, text in _take(worker, 5)) == ["new", "old"]


def test_a_bad_priority_or_limit_is_refused_before_anything_changes(runtime: Runtime) -> None:
    with pytest.raises(UnknownPriority, match="high, default, low"):
        _send(str(uuid.uuid4()), "x", priority="urgent")
    with pytest.raises(InvalidLimit):
        set_limit(runtime, "testq", 0, by="test", reason="", known=["testq"])
    ns = runtime.settings.broker_namespace
    assert queued(runtime.broker.client, ns, "testq") == 0
    assert not runtime.broker.client.exists(lanes.limits_key(ns, "testq"))


def test_a_job_staged_through_the_outbox_keeps_its_priority(
    runtime: Runtime, worker: FleetRedisBroker
) -> None:
    org = str(uuid.uuid4())

    def email(key: str) -> dict[str, Any]:
        return {"org_id": org, "entity_id": str(uuid.uuid4()), "template_key": key,
                "recipient_email": "ada@example.com"}  # fmt: skip

    for i in range(3):
        catalog.EMAIL_SEND.send(email(f"low{i}"), priority="low")
    with runtime.sessions() as session, session.begin():
        outbox.enqueue(session, catalog.EMAIL_SEND, email("staged"), priority="high")
    assert outbox.relay_once(runtime, now=datetime.now(UTC)).published == 1
    (taken,) = fetch(worker, "email", 1)
    assert codec.decode(taken[1] or b"").args[0]["template_key"] == "staged"
    with runtime.sessions() as session, session.begin(), pytest.raises(UnknownPriority):
        outbox.enqueue(session, catalog.EMAIL_SEND, email("x"), priority="urgent")  # type: ignore[arg-type]
