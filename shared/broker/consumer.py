"""The fleet's Redis consumer (a subclass of Dramatiq's private `_RedisConsumer`, see
`version.py`): acknowledgements that wait for durability off the worker thread (`acker.py`),
messages fetched with their Redis ids, and an idle consumer woken by new messages instead of
sleeping through its back-off.

Fetch. Dramatiq's own "fetch" command returns each message's data only, so a message that
cannot be decoded could not even be acknowledged; `lua/fetch.lua` does what it does and returns
the Redis id with the data. Bytes that are no Dramatiq message are recorded as a DEAD run
(`UNDECODABLE`) and acknowledged: no message can stop a consumer.

Wake-up. Stock Dramatiq sleeps between empty fetches with a back-off up to its idle timeout,
which puts a message sent to an idle queue 5–40 ms behind. `send` (`lua/enqueue_once.lua`)
also pushes a token on `<queue>.wake` (and so does the broker's own enqueue: retries, replays,
delayed messages coming due); an idle consumer waits on that list with BLPOP instead of
sleeping, up to `IDLE_WAIT_S` once idle, so the next send wakes it at once and an idle process
costs a few Redis commands per second.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
import structlog
from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import _RedisConsumer
from dramatiq.common import compute_backoff, current_millis
from dramatiq.errors import ConnectionClosed
from dramatiq.message import Message

from . import codec
from .delivery import delivery_of
from .scripts import source

log = structlog.get_logger("jobfleet.consumer")

#: Longest a consumer waits for room in a full backlog before its worker loop checks in again.
BACKLOG_WAIT_S = 0.1
#: Longest a consumer of a paused queue waits before it looks again (resume within ~0.5 s).
PAUSED_WAIT_S = 0.5
#: Longest wait of an idle consumer on its wake list (a fetch follows each wait).
IDLE_WAIT_S = 2.0
#: Empty fetches in a row after which a consumer is idle (its back-off is near its cap).
IDLE_AFTER_MISSES = 5


def wake_key(namespace: str, queue_name: str) -> str:
    return f"{namespace}:{queue_name}.wake"


#: Dramatiq's "fetch" command, returning each message's Redis id with its data (Dramatiq's own
#: returns the data only, so a message that cannot be decoded could not even be acknowledged).
FETCH = source("fetch.lua")
#: Pause after an undecodable message could not be recorded (the run store is down).
UNDECODABLE_RETRY_S = 1.0
#: Fields of a Dramatiq message and the types a worker can process.
_SHAPE: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("queue_name", str),
    ("actor_name", str),
    ("args", (list, tuple)),
    ("kwargs", dict),
    ("options", dict),
    ("message_id", str),
)


#: Deepest nesting of JSON a message may carry. Deeper is refused as undecodable, whatever
#: this process's recursion limit (the JSON decoder's own limit depends on it).
MAX_NESTING = 100


def _check_shape(message: Message[Any], data: bytes) -> None:
    for name, kind in _SHAPE:
        if not isinstance(getattr(message, name), kind):
            raise TypeError(f"{name} must be {kind}, got {type(getattr(message, name)).__name__}")
    if data.count(b"[") + data.count(b"{") > MAX_NESTING and _depth(message.args) > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")


def _depth(value: Any) -> int:
    """How deep `value` nests lists and dicts (iteratively: no recursion limit applies)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list | tuple):
            deepest = max(deepest, depth)
            if deepest > MAX_NESTING:
                return deepest
            stack.extend((child, depth + 1) for child in item)
    return deepest


#: Fetch ids (`fetch`), unique within the process.
_fetch_ids = itertools.count(1)


def fetch(broker: Any, queue_name: str, count: int) -> list[tuple[str, bytes | None]]:
    """Up to `count` messages as (Redis message id, data), moved to this worker's unacked set
    and beating its heartbeat, as Dramatiq's own fetch does.

    A fetch whose reply was lost had moved its messages to this worker's unacked set all the
    same, where nothing returns them while the worker lives (a failover between a fetch and
    its reply; redis-py sends the command again on its own). So each fetch has an id, kept
    until a reply comes: sent again, by redis-py or by the next fetch of this queue (after
    Dramatiq restarted the consumer), it gets the messages that fetch took (`lua/fetch.lua`)."""
    script = broker.__dict__.get("fleet_fetch")
    if script is None:
        script = broker.__dict__["fleet_fetch"] = broker.client.register_script(FETCH)
    unanswered: dict[str, str] = broker.__dict__.setdefault("fleet_fetch_unanswered", {})
    fetch_id = unanswered.get(queue_name)
    if fetch_id is None:
        fetch_id = unanswered[queue_name] = str(next(_fetch_ids))
    reply = script(
        keys=[broker.namespace],
        args=[
            current_millis(),
            queue_name,
            broker.broker_id,
            count,
            fetch_id,
            # The concurrency limits the settings give this queue (`lanes.settings_limits`).
            getattr(broker, "fair_limits", {}).get(queue_name, ""),
        ],
    )
    del unanswered[queue_name]
    return [
        (reply[i].decode() if isinstance(reply[i], bytes) else str(reply[i]), reply[i + 1])
        for i in range(0, len(reply), 2)
    ]


class BodyMissing(LookupError):
    """A queue entry whose id has no message in `<queue>.msgs` (pushed by hand, or its body
    lost): before, it stayed in the worker's unacked set for the worker's life, unrecorded."""

    def __init__(self, queue: str, redis_id: str) -> None:
        super().__init__(f"no message body in {queue}.msgs for id {redis_id}")


def _undecodable_recorder(broker: Any) -> Callable[[str, str, bytes, Exception], Any] | None:
    """The tracking middleware's `record_undecodable`, when this broker has one."""
    for middleware in getattr(broker, "middleware", ()):
        recorder = getattr(middleware, "record_undecodable", None)
        if recorder is not None:
            return recorder  # type: ignore[no-any-return]
    return None


def _unreturned(broker: Any) -> dict[str, list[str]]:
    """Queue -> Redis ids of messages a closing consumer could not hand back (Redis down)."""
    ids: dict[str, list[str]] = broker.__dict__.setdefault("fleet_unreturned", {})
    return ids


def _consumer_threads(broker: Any) -> dict[str, threading.Thread]:
    threads: dict[str, threading.Thread] = broker.__dict__.setdefault("fleet_consumer_threads", {})
    return threads


def dead_consumers(broker: Any) -> list[str]:
    """Queues whose consumer thread died while it was meant to run (an error Dramatiq's own
    restart loop did not catch): nothing is fetched from them until the process restarts."""
    return sorted(
        queue
        for queue, thread in list(_consumer_threads(broker).items())
        if not thread.is_alive() and getattr(thread, "running", False)
    )


def dead_consumers_key(namespace: str) -> str:
    """Hash: worker (broker) id -> JSON {queues, at (ms)} of its dead consumer threads, written
    by its heartbeat while any is dead (read by `fleet status`)."""
    return f"{namespace}:jobfleet:dead-consumers"


def report_dead_consumers(broker: Any) -> list[str]:
    """Publish this worker's dead consumer threads (if any) for `fleet status`."""
    dead = dead_consumers(broker)
    if dead:
        broker.client.hset(
            dead_consumers_key(broker.namespace),
            broker.broker_id,
            json.dumps({"queues": dead, "at": current_millis()}),
        )
    return dead


def consumers_check(broker: Any) -> Callable[[], None]:
    """A readiness check (`/health/ready`): fails while any consumer thread is dead."""

    def check() -> None:
        dead = dead_consumers(broker)
        if dead:
            raise RuntimeError(f"consumer thread dead for queue(s) {', '.join(dead)}")

    return check


class FleetRedisConsumer(_RedisConsumer):
    def __init__(self, broker: Any, queue_name: str, prefetch: int, timeout: int) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.message_cache: list[tuple[str, bytes | None]] = []
        threads = _consumer_threads(broker)
        #: A consumer of this queue ran in this process before (Dramatiq restarts one after a
        #: connection error): what its predecessor left in this worker's unacked set is
        #: returned before the first fetch (`_recover`).
        self._recover_due = queue_name in threads
        # Dramatiq's consumer thread builds its consumer in its own thread: remember it, so
        # that readiness can tell when it died (`dead_consumers`).
        threads[queue_name] = threading.current_thread()

    def ack(self, message: Any) -> None:
        state = delivery_of(message)
        if state.hand_back:
            self.hand_back(message)
            return
        durable = state.durable
        if durable is None:
            super().ack(message)  # type: ignore[no-untyped-call]
            return
        # Its processing is over: it no longer counts against the prefetch (as with an
        # immediate ack), so the consumer keeps its threads fed while the ack waits.
        self.queued_message_ids.discard(message.message_id)
        self.broker.acker.submit(self, message, durable)

    def hand_back(self, message: Any) -> None:
        """Put a message this worker took back on its queue (what was to follow it could not
        be enqueued: `Delivery.hand_back`). Raises `ConnectionClosed` while Redis is
        unreachable, which Dramatiq's consumer thread retries until it answers."""
        self.requeue([message])
        self.queued_message_ids.discard(message.message_id)
        log.warning(
            "consumer.handed_back", queue=self.queue_name, job_id=message.options.get("job_id")
        )

    def requeue(self, messages: Any) -> None:
        """Dramatiq's requeue, raising `ConnectionClosed` while Redis is unreachable: Dramatiq's
        consumer thread, closing after an error, catches only that; a plain redis error there
        (a delayed message coming due while Redis was down) ended the thread for good."""
        try:
            super().requeue(messages)  # type: ignore[no-untyped-call]
        except redis.ConnectionError as e:
            raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]

    def __next__(self) -> MessageProxy | None:
        try:
            if self._recover_due:
                self._recover()
            while True:
                watch = self.broker.store_watch
                # The run store is down or not migrated: a message taken now could not be
                # started, only handed back (`db/watch.py`). Delayed messages (.DQ) need no
                # run store and keep moving.
                if watch and not self.queue_name.endswith(".DQ") and not watch.usable():
                    watch.wait(BACKLOG_WAIT_S)
                    return None
                # An operator paused this queue (`pauses.py`): hand back what was prefetched and
                # take nothing until it is resumed. Its delay queue keeps moving due messages
                # into it, where they wait.
                pauses = self.broker.pause_watch
                if (
                    pauses
                    and not self.queue_name.endswith(".DQ")
                    and pauses.paused(self.queue_name)
                ):
                    self._hand_back_prefetched("paused")
                    pauses.wait(PAUSED_WAIT_S)
                    return None
                try:
                    redis_id, data = self.message_cache.pop(0)
                    if data is None:  # an id with no body: recorded DEAD and acknowledged
                        self._undecodable(redis_id, b"", BodyMissing(self.queue_name, redis_id))
                        continue
                    self.misses = 0
                    message = self._decode(redis_id, data)
                    if message is None:  # recorded as a DEAD run and acknowledged
                        continue
                    self.queued_message_ids.add(message.message_id)
                    return MessageProxy(message)
                except IndexError:
                    messages = []
                    if not self.broker.acker.has_room():
                        # Back-pressure: wait for the run store, not counted as an idle miss.
                        self.broker.acker.wait_for_room(BACKLOG_WAIT_S)
                        return None
                    if self.outstanding_message_count < self.prefetch:
                        self.message_cache = messages = fetch(
                            self.broker,
                            self.queue_name,
                            self.prefetch - self.outstanding_message_count,
                        )
                    if not messages:
                        self.misses, backoff_ms = compute_backoff(
                            self.misses, max_backoff=self.timeout
                        )
                        self._idle_wait(backoff_ms)
                        return None
        except redis.ConnectionError as e:
            raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Hand back the messages fetched but never given to a worker thread: Dramatiq leaves
        them in this worker's unacknowledged set, where they wait for the heartbeat
        maintenance to declare the worker dead (~5 s) before anyone else can run them."""
        self._hand_back_prefetched("closing")
        super().close()

    def _hand_back_prefetched(self, why: str) -> None:
        # The ids come from the fetch, not from the data: nothing is decoded here (a message
        # that cannot be decoded must not stop this from returning the others).
        ids = [redis_id for redis_id, _ in self.message_cache]
        self.message_cache = []
        if ids:
            try:
                self.broker.do_requeue(self.queue_name, *ids)
                log.info(
                    "consumer.prefetch_returned", queue=self.queue_name, messages=len(ids), why=why
                )
            except redis.ConnectionError as exc:  # the next consumer of this queue returns them
                _unreturned(self.broker).setdefault(self.queue_name, []).extend(ids)
                log.warning("consumer.prefetch_not_returned", messages=len(ids), error=str(exc))

    def _recover(self) -> None:
        """Return what this consumer's predecessor (of this queue, in this process) left in
        this worker's unacked set, which nothing else returns while the worker lives:

        - the messages it had prefetched and could not hand back as it closed (Redis down);
        - for a delay queue, every message: Dramatiq's consumer thread drops the delayed
          messages it holds when its connection fails (it holds none once restarted). Before,
          a retry or deferral held then never ran until the worker restarted.

        A fetch whose reply was lost is sent again by the next fetch (`fetch`)."""
        unreturned = _unreturned(self.broker)
        ids = set(unreturned.get(self.queue_name, ()))
        if self.queue_name.endswith(".DQ"):
            acks = f"{self.broker.namespace}:__acks__.{self.broker.broker_id}.{self.queue_name}"
            ids.update(
                i.decode() if isinstance(i, bytes) else str(i)
                for i in self.broker.client.smembers(acks)
            )
        if ids:  # a connection error here leaves it all for the next consumer to return
            self.broker.do_requeue(self.queue_name, *ids)
            log.info("consumer.returned_after_restart", queue=self.queue_name, messages=len(ids))
        unreturned.pop(self.queue_name, None)
        self._recover_due = False

    def _decode(self, redis_id: str, data: bytes) -> Message[Any] | None:
        """The message, or None when `data` is no Dramatiq message: then it is recorded as a
        DEAD run (`UNDECODABLE`) and acknowledged, and this consumer goes on."""
        try:
            message: Message[Any] = codec.decode(data)
            _check_shape(message, data)
        except Exception as exc:  # DecodeError, RecursionError, a field of the wrong type
            self._undecodable(redis_id, data, exc)
            return None
        # The id this message is stored under is the one its ack must remove, whatever (if
        # anything) its options say; and it is processed as a message of the queue it came from.
        if message.options.get("redis_message_id") != redis_id:
            message.options["redis_message_id"] = redis_id
        if message.queue_name != self.queue_name:
            message = message.copy(queue_name=self.queue_name)
        return message

    def _undecodable(self, redis_id: str, data: bytes, error: Exception) -> None:
        recorder = _undecodable_recorder(self.broker)
        log.error(
            "consumer.undecodable",
            queue=self.queue_name,
            redis_message_id=redis_id,
            size=len(data),
            error=f"{type(error).__name__}: {error}"[:300],
        )
        if recorder is None:
            # No run store in this process: out of the queue into Redis's dead-letter set.
            self.broker.do_nack(self.queue_name, redis_id)
            return
        try:
            recorder(self.queue_name, redis_id, data, error)
        except Exception as exc:  # the run store is down: hand it back, try again later
            log.warning("consumer.undecodable_not_recorded", error=str(exc)[:300])
            self.broker.do_requeue(self.queue_name, redis_id)
            time.sleep(UNDECODABLE_RETRY_S)
            return
        self.broker.do_ack(self.queue_name, redis_id)

    def _idle_wait(self, backoff_ms: int) -> None:
        """Wait for the back-off, unless an enqueue to this queue wakes us first; after
        `IDLE_AFTER_MISSES` empty fetches in a row (the queue is idle), wait up to `IDLE_WAIT_S`.

        Every enqueue pushes a token on the queue's wake list (`send`, and the broker's own
        enqueue: retries, replays, delayed messages coming due, requeued messages of a dead
        worker), so a long wait costs no wake-up latency; it only bounds how late a message
        put there by other means (another producer's plain LPUSH) is seen. Before, an idle
        consumer polled every 50 ms: ~85 Redis commands per second each (bench/idle_cost.py)."""
        if self.outstanding_message_count >= self.prefetch:
            time.sleep(backoff_ms / 1000)  # no room: nothing to wake for
            return
        delayed = self.queue_name.endswith(".DQ")
        if delayed and self.outstanding_message_count:
            # Holding delayed messages: Dramatiq moves them when they come due, between two
            # calls of this consumer, so keep returning at the back-off's pace.
            time.sleep(backoff_ms / 1000)
            return
        if backoff_ms < 2:
            return
        idle = self.misses >= IDLE_AFTER_MISSES
        keys = [wake_key(self.broker.namespace, self.queue_name)]
        process_key = getattr(self.broker, "process_wake_key", None)
        if process_key is not None:
            keys.append(process_key())
        timeout = IDLE_WAIT_S if idle else backoff_ms / 1000
        if self.broker.client.blpop(keys, timeout=timeout):
            self.misses = 0
