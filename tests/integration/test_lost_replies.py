"""A Redis command that ran but whose reply never came back (a primary killed between the two,
a network cut), and a worker's connection broken while it held messages: nothing is stuck in a
live worker's unacknowledged set, nothing is recorded wrong.

redis-py sends a command again on a new connection when the old one fails (10 tries within
a few seconds by default), so a fetch that ran may run a second time, unnoticed by the
consumer. Redis is reached through a TCP proxy (tests/support/proxy.py) that loses the reply
to one chosen request, or goes down and comes back.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from dramatiq.errors import ConnectionClosed
from redis.connection import parse_url

from shared.broker import build_broker
from shared.broker.consumer import FETCH
from shared.broker.gate import SCRIPT as ENQUEUE_ONCE
from shared.broker.starts import RunStarts
from shared.config import Settings
from shared.db.connect import run_writer
from shared.jobs import runs
from shared.jobs.run_writer import Started
from shared.runtime import Runtime
from tests.support.consumer import fetch_one, unacked
from tests.support.jobs import ECHO, message_info, raw_message
from tests.support.procs import Procs, free_port
from tests.support.proxy import Proxy
from tests.support.queues import queued
from tests.support.wait import wait_for, wait_run

FETCH_SHA = hashlib.sha1(FETCH.encode()).hexdigest().encode()
ENQUEUE_SHA = hashlib.sha1(ENQUEUE_ONCE.encode()).hexdigest().encode()


@pytest.fixture
def proxy(settings: Settings) -> Iterator[Proxy]:
    target = parse_url(settings.redis_url)  # type: ignore[no-untyped-call]
    p = Proxy(free_port(), (target.get("host", "127.0.0.1"), int(target.get("port", 6379))))
    p.up()
    yield p
    p.down()


def _through(settings: Settings, proxy: Proxy) -> Settings:
    db = parse_url(settings.redis_url).get("db", 0)  # type: ignore[no-untyped-call]
    return settings.model_copy(update={"redis_url": f"redis://{proxy.url}/{db}"})


def test_a_fetch_whose_reply_was_lost_takes_the_same_messages_when_it_is_sent_again(
    runtime, settings: Settings, proxy: Proxy
) -> None:
    """Before: the second fetch took nothing (the queue was empty) and the three messages sat
    in the live worker's unacknowledged set, which only its death would return."""
    broker = build_broker(_through(settings, proxy))
    broker.declare_queue("testq")
    for n in range(3):
        broker.enqueue(raw_message("test:echo", {"n": n}))
    consumer = broker.consume("testq", prefetch=3, timeout=50)
    lost = proxy.lose_reply_to(FETCH_SHA)

    fetched = [fetch_one(consumer) for _ in range(3)]

    assert lost.is_set()  # the fetch ran, its reply was lost, redis-py sent it again
    assert sorted(m.args[0]["n"] for m in fetched) == [0, 1, 2]
    assert unacked(broker, "testq") == 3
    assert queued(broker.client, broker.namespace, "testq") == 0


def test_a_fetch_that_failed_for_good_gets_its_messages_back_at_the_next_consumer(
    runtime, settings: Settings, proxy: Proxy
) -> None:
    """The reply is lost and Redis stays out of reach past redis-py's retries: the consumer
    raises (Dramatiq restarts it); its successor sends that fetch again and gets the messages
    it took."""
    broker = build_broker(_through(settings, proxy))
    broker.declare_queue("testq")
    for n in range(2):
        broker.enqueue(raw_message("test:echo", {"n": n}))
    consumer = broker.consume("testq", prefetch=2, timeout=50)
    proxy.lose_reply_to(FETCH_SHA, then_down=True)

    with pytest.raises(ConnectionClosed):
        next(consumer)
    proxy.up()
    consumer.close()
    successor = broker.consume("testq", prefetch=2, timeout=50)

    assert sorted(fetch_one(successor).args[0]["n"] for _ in range(2)) == [0, 1]
    assert unacked(broker, "testq") == 2


def test_a_requeue_while_redis_is_unreachable_raises_what_dramatiq_s_consumer_thread_catches(
    runtime, settings: Settings, proxy: Proxy
) -> None:
    """Closing after an error, Dramatiq's consumer thread requeues the delayed messages it holds
    and catches only its own `ConnectionClosed`: the plain redis error it got before ended
    the thread (a delayed message coming due while Redis was down stopped the delay queue)."""
    broker = build_broker(_through(settings, proxy))
    broker.declare_queue("testq")
    broker.enqueue(raw_message("test:echo", {"n": 1}))
    consumer = broker.consume("testq", prefetch=1, timeout=50)
    message = fetch_one(consumer)
    proxy.down()

    with pytest.raises(ConnectionClosed):
        consumer.requeue([message])


def _held_delayed(runtime: Runtime) -> int:
    client = runtime.broker.client  # type: ignore[attr-defined]
    ns = runtime.settings.broker_namespace
    return sum(int(client.scard(key)) for key in client.scan_iter(f"{ns}:__acks__.*.testq.DQ"))


@pytest.mark.slow
def test_delayed_messages_a_worker_held_when_its_redis_connection_broke_run_when_due(
    runtime, settings: Settings, procs: Procs, proxy: Proxy
) -> None:
    """Dramatiq's consumer thread drops the delayed messages it holds when its connection
    breaks; they stay in the worker's unacknowledged set. Before: they never ran while that
    worker lived (its heartbeat kept them from everyone else)."""
    worker = procs.worker(threads=2, env={"REDIS_URL": f"redis://{proxy.url}/0"})
    org = uuid.uuid4()
    payload = {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "later"}
    sent = runtime.sender.send(ECHO, payload, delay_ms=4_000)
    wait_for(lambda: _held_delayed(runtime) == 1, what="the delayed message held by the worker")

    proxy.down()
    time.sleep(1.5)
    proxy.up()

    wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=20)
    assert worker.alive()
    assert _held_delayed(runtime) == 0


@pytest.mark.slow
def test_a_delivery_that_cannot_be_deferred_while_redis_is_unreachable_goes_back_to_its_queue(
    runtime, settings: Settings, procs: Procs, proxy: Proxy
) -> None:
    """A delivery of a run in flight elsewhere is deferred (put back through the delay queue);
    with Redis unreachable at that moment it was dead-lettered into Redis's own dead-letter set
    (`.XQ`), which nothing of the fleet reads, while its run stayed RUNNING: never run again,
    never DEAD, invisible (the Sentinel failover test's stuck runs). It now goes back on its
    queue once Redis answers, and is deferred then."""
    org = uuid.uuid4()
    payload = {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "in flight"}
    sent = runtime.sender.send(ECHO, payload)
    assert runtime.sender.flush(10)
    elsewhere = run_writer(settings)
    elsewhere.lease_s = 60.0  # another worker runs it, under a live lease
    try:
        assert isinstance(elsewhere.start_run(message_info(sent.job_id), 3), Started)
        # What that worker does once its start is written: the job id's key says so, and this
        # delivery asks the run store (shared/broker/starts.py).
        assert sent.message_id is not None
        client = runtime.broker.client  # type: ignore[attr-defined]
        RunStarts(settings.broker_namespace).written(
            client, sent.job_id, sent.message_id, elsewhere.owner
        )
        # The deferral's enqueue: it carries the payload (the delivery's script calls before it
        # name the job id too).
        dropped = proxy.lose_request(b"in flight")
        worker = procs.worker(threads=2, env={"REDIS_URL": f"redis://{proxy.url}/0"})
        wait_for(dropped.is_set, what="the deferral's enqueue dropped, Redis unreachable")
        time.sleep(1)
        proxy.up()

        ns = settings.broker_namespace
        client = runtime.broker.client  # type: ignore[attr-defined]
        wait_for(
            lambda: client.hexists(f"{ns}:testq.DQ.msgs", _deferred_id(client, ns)),
            timeout=20,
            what="the delivery deferred once Redis answered",
        )
        assert client.zcard(f"{ns}:testq.XQ") == 0
        assert worker.alive()
        assert runs.find(sent.job_id, org_id=org).status == "RUNNING"  # still the other's
    finally:
        elsewhere.close()


def _deferred_id(client: Any, ns: str) -> str:
    ids = client.hkeys(f"{ns}:testq.DQ.msgs")
    return ids[0].decode() if ids else ""


def test_a_send_whose_reply_was_lost_is_recorded_as_sent_not_as_a_duplicate(
    runtime, settings: Settings, proxy: Proxy, db
) -> None:
    """The enqueue ran and its reply was lost; redis-py sent it again and the job id was taken
    by that very message. Before: the send said "duplicate" and recorded no QUEUED run, so a
    Redis that lost the message left nothing to recover it from."""
    producer = Runtime(_through(settings, proxy))
    try:
        org = uuid.uuid4()
        payload = {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "once"}
        lost = proxy.lose_reply_to(ENQUEUE_SHA)

        result = producer.sender.send(ECHO, payload)

        assert lost.is_set()
        assert not result.duplicate
        assert result.status == "QUEUED"
        assert producer.sender.flush(10)
        row = db.execute(
            "SELECT status, message_id FROM job_runs WHERE job_id = %s", (result.job_id,)
        ).fetchone()
        assert row == ("QUEUED", result.message_id)
    finally:
        producer.close()
