"""The fleet consumer: deferred acknowledgements and wake-up on send (shared/broker/)."""

from __future__ import annotations

import threading
import time
import uuid

import redis
from structlog.testing import capture_logs

from shared.broker import build_broker, delivery_of
from tests.support.consumer import fetch_one, unacked
from tests.support.jobs import ECHO, raw_message
from tests.support.queues import queued


class _Durable:
    def __init__(self, answer: bool) -> None:
        self.released = threading.Event()
        self.answer = answer

    def wait(self, timeout: float) -> bool:
        self.released.wait(timeout)
        return self.answer


def test_a_message_is_acknowledged_only_once_its_outcome_is_durable(runtime, settings) -> None:
    broker = build_broker(settings)
    broker.declare_queue("testq")
    broker.enqueue(raw_message("test:echo", {}))
    consumer = broker.consume("testq", prefetch=1, timeout=50)
    message = fetch_one(consumer)
    durable = _Durable(answer=True)
    delivery_of(message).durable = durable

    consumer.ack(message)  # returns at once: the worker thread is free
    assert unacked(broker, "testq") == 1

    durable.released.set()
    assert broker.acker.drain(5)
    assert unacked(broker, "testq") == 0


def test_an_outcome_that_cannot_be_made_durable_puts_the_message_back_on_its_queue(
    runtime, settings
) -> None:
    """Not acknowledged, and not left in this live worker's unacknowledged set either (it came
    back only when the worker stopped or died): back on its queue, to be run again."""
    broker = build_broker(settings)
    broker.declare_queue("testq")
    broker.enqueue(raw_message("test:echo", {}))
    consumer = broker.consume("testq", prefetch=1, timeout=50)
    message = fetch_one(consumer)
    durable = _Durable(answer=False)
    durable.released.set()
    delivery_of(message).durable = durable

    consumer.ack(message)
    assert broker.acker.drain(5)
    assert unacked(broker, "testq") == 0
    assert queued(broker.client, broker.namespace, "testq") == 1
    assert fetch_one(consumer).message_id == message.message_id


def test_an_idle_consumer_is_woken_by_a_send_before_its_back_off_ends(runtime, settings) -> None:
    broker = build_broker(settings)
    broker.declare_queue("testq")
    consumer = broker.consume("testq", prefetch=1, timeout=5_000)
    sender = threading.Timer(
        0.2,
        lambda: ECHO.send(
            {"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()), "message": "wake"}
        ),
    )
    sender.start()
    started = time.monotonic()
    consumer._idle_wait(5_000)  # would sleep 5 s without a wake-up
    waited = time.monotonic() - started
    sender.join()
    assert waited < 2.5, f"woke after {waited:.2f}s"
    assert fetch_one(consumer) is not None


def test_a_full_ack_backlog_stops_fetching_until_the_run_store_catches_up(
    runtime, settings
) -> None:
    """Outcomes not yet durable are bounded: a slow Postgres slows the consumer down rather
    than pile up finished messages (and memory) without limit."""
    broker = build_broker(settings)
    broker.acker.backlog_max = 1
    broker.declare_queue("testq")
    for n in range(2):
        broker.enqueue(raw_message("test:echo", {"n": n}))
    consumer = broker.consume("testq", prefetch=1, timeout=50)
    first = fetch_one(consumer)
    durable = _Durable(answer=True)
    delivery_of(first).durable = durable
    consumer.ack(first)  # the backlog is full until this outcome is durable

    with capture_logs() as logs:
        for _ in range(5):
            assert next(consumer) is None
    paused = [entry for entry in logs if entry["event"] == "consumer.fetch_paused"]
    assert len(paused) == 1 and paused[0]["backlog"] == 1  # said once, not per poll
    assert unacked(broker, "testq") == 1  # the second message was not fetched
    assert queued(broker.client, broker.namespace, "testq") == 1

    durable.released.set()
    second = fetch_one(consumer)
    assert second.args == ({"n": 1},)


def test_a_process_holds_at_most_one_durable_batch_of_finished_messages(runtime, settings) -> None:
    """The ack backlog is one statement of the durable lane (`TRACKING_BATCH_MAX`): more would
    not be written sooner, only held, and a process keeps the memory of its largest backlog
    (at 1,024 a 4-6 MB step at the first slow commit, bench/memory.py)."""
    broker = build_broker(settings.model_copy(update={"tracking_batch_max": 3}))
    broker.declare_queue("testq")
    for n in range(4):
        broker.enqueue(raw_message("test:echo", {"n": n}))
    consumer = broker.consume("testq", prefetch=1, timeout=50)
    durable = _Durable(answer=True)
    for _ in range(3):
        message = fetch_one(consumer)
        delivery_of(message).durable = durable
        consumer.ack(message)

    assert next(consumer) is None  # a full batch waits for its outcomes
    assert queued(broker.client, broker.namespace, "testq") == 1  # the fourth stays queued

    durable.released.set()
    assert fetch_one(consumer).args == ({"n": 3},)
    assert broker.acker.drain(5)


def test_closing_hands_back_prefetched_messages_at_once(runtime, settings) -> None:
    """Fetched but never started: back on the queue when the worker stops, not ~5 s later."""
    broker = build_broker(settings)
    broker.declare_queue("testq")
    for n in range(3):
        broker.enqueue(raw_message("test:echo", {"n": n}))
    consumer = broker.consume("testq", prefetch=3, timeout=50)
    started = fetch_one(consumer)  # the other two wait in the consumer's prefetch cache
    assert unacked(broker, "testq") == 3
    assert queued(broker.client, broker.namespace, "testq") == 0

    consumer.close()

    assert unacked(broker, "testq") == 1  # only the one a worker thread holds
    assert queued(broker.client, broker.namespace, "testq") == 2
    other = broker.consume("testq", prefetch=3, timeout=50)
    returned = {fetch_one(other).args[0]["n"] for _ in range(2)}
    assert returned == {0, 1, 2} - {started.args[0]["n"]}


def test_a_batch_of_acks_is_one_redis_command_per_queue(runtime, settings, monkeypatch) -> None:
    """The acknowledgements of a batch cost one round trip per queue: the `ack_many` script
    called as is (EVALSHA, loaded once), not through a pipeline, which asks Redis `SCRIPT
    EXISTS` before every execution: a second round trip per batch, in the acker thread that
    shares the GIL with the workers."""
    broker = build_broker(settings)
    broker.declare_queue("testq")
    for n in range(4):
        broker.enqueue(raw_message("test:echo", {"n": n}).copy(queue_name="testq"))
    consumer = broker.consume("testq", prefetch=4, timeout=50)
    fetched = [fetch_one(consumer) for _ in range(4)]

    def ack_all() -> None:
        for message in fetched:
            delivery_of(message).durable = _Durable(answer=True)
            delivery_of(message).durable.released.set()  # type: ignore[union-attr]
            consumer.ack(message)
        assert broker.acker.drain(5)

    ack_all()  # the first batch may load the script
    for message in (raw_message("test:echo", {"n": n}) for n in range(4, 8)):
        broker.enqueue(message.copy(queue_name="testq"))
    fetched = [fetch_one(consumer) for _ in range(4)]
    sent: list[bytes] = []
    pool = broker.client.connection_pool
    original = redis.connection.AbstractConnection.send_packed_command

    def spy(self, command, *args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread().name.startswith("jobfleet-acker"):
            chunks = [command] if isinstance(command, bytes | str) else list(command)
            sent.append(b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks))
        return original(self, command, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", spy)
    ack_all()
    assert pool is broker.client.connection_pool
    assert len(sent) == 1, sent
    assert b"EVALSHA" in sent[0].upper() and b"SCRIPT" not in sent[0].upper()
    assert unacked(broker, "testq") == 0


def test_a_batch_of_acks_removes_each_message_of_each_queue_and_nothing_of_another_worker(
    runtime, settings
) -> None:
    """`lua/ack_many.lua`: one call per queue does Dramatiq's `ack` for each id (out of this
    worker's unacknowledged set, its data deleted); a message another worker holds is left."""
    broker = build_broker(settings)
    other = build_broker(settings)  # another worker (its own broker id)
    for queue in ("testq", "testq2"):
        broker.declare_queue(queue)
        for n in range(3):
            broker.enqueue(raw_message("test:echo", {"n": n}).copy(queue_name=queue))
    mine = {q: broker.consume(q, prefetch=2, timeout=50) for q in ("testq", "testq2")}
    fetched = [(mine[q], fetch_one(mine[q])) for q in ("testq", "testq2") for _ in range(2)]
    held = fetch_one(other.consume("testq", prefetch=1, timeout=50))
    for consumer, message in fetched:
        delivery_of(message).durable = _Durable(answer=True)
        delivery_of(message).durable.released.set()  # type: ignore[union-attr]
        consumer.ack(message)
    assert broker.acker.drain(5)

    for queue in ("testq", "testq2"):
        assert unacked(broker, queue) == 0
        assert not any(c.queued_message_ids for c in mine.values())
    ns = broker.namespace
    stored = broker.client.hkeys(f"{ns}:testq.msgs") + broker.client.hkeys(f"{ns}:testq2.msgs")
    left = {k.decode() for k in stored}
    assert held.options["redis_message_id"] in left  # the other worker's, untouched
    for _, message in fetched:
        assert message.options["redis_message_id"] not in left
    assert unacked(other, "testq") == 1
