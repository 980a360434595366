"""The fleet's Redis consumer: acknowledgements that wait for durability off the worker thread,
and an idle consumer woken by new messages instead of sleeping through its back-off.

Deferred ack. The tracking middleware hands a terminal outcome (COMPLETED, DEAD, ...) to the
run writer's durable lane and attaches the pending write to the message instead of waiting for
it. Dramatiq's worker thread then calls `ack`; for such a message this consumer gives it to the
process's `Acker`, whose thread acknowledges it once the row is durable, and the worker thread
takes its next message at once. "A message is acknowledged only after its COMPLETED/DEAD row is
durable" still holds; the durable lane's batches grow from the number of worker threads to the
number of messages in flight, so one fsync serves many more jobs.

Wake-up. Stock Dramatiq sleeps between empty fetches with a back-off up to its idle timeout,
which puts a message sent to an idle queue 5–40 ms behind. `send` (`jobs/lua/enqueue_once.lua`)
also pushes a token on `<queue>.wake`; an idle consumer waits on that list with BLPOP for its
back-off instead of sleeping, so the next send wakes it at once.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import redis
import structlog
from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import _RedisConsumer
from dramatiq.common import compute_backoff, current_millis
from dramatiq.errors import ConnectionClosed
from dramatiq.message import Message

log = structlog.get_logger("jobfleet.consumer")

#: Longest wait for a durable outcome before the message is handed back instead of acked.
DURABLE_TIMEOUT_S = 60.0
#: Most messages acknowledged in one Redis round trip.
ACK_BATCH_MAX = 256
#: Most finished messages a process holds while their outcomes are made durable. Past it, its
#: consumers stop fetching until the run store catches up: a slow Postgres slows the workers
#: down instead of piling up unacknowledged messages (and memory) without bound.
ACK_BACKLOG_MAX = 1_024
#: Longest a consumer waits for room in a full backlog before its worker loop checks in again.
BACKLOG_WAIT_S = 0.1
#: Least time between two "fetching paused" log lines of one process.
BACKLOG_LOG_EVERY_S = 30.0


def wake_key(namespace: str, queue_name: str) -> str:
    return f"{namespace}:{queue_name}.wake"


class Acker:
    """Acknowledges messages once their outcome is durable, in one thread per process."""

    def __init__(self, *, backlog_max: int = ACK_BACKLOG_MAX) -> None:
        self.backlog_max = backlog_max
        self._logged_full = -BACKLOG_LOG_EVERY_S
        self._queue: queue.SimpleQueue[tuple[Any, Any, Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Condition(self._lock)

    def submit(self, consumer: Any, message: Any, durable: Any) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="jobfleet-acker", daemon=True
                )
                self._thread.start()
            self._pending += 1
        self._queue.put((consumer, message, durable))

    def has_room(self) -> bool:
        return self._pending < self.backlog_max

    def wait_for_room(self, timeout: float) -> bool:
        """Wait until the backlog is below `backlog_max`; False on timeout. Says so in the log
        (at most every `BACKLOG_LOG_EVERY_S`): fetching is paused because Postgres is slow."""
        now = time.monotonic()
        if now - self._logged_full >= BACKLOG_LOG_EVERY_S:
            self._logged_full = now
            log.warning(
                "consumer.fetch_paused",
                reason="outcomes wait for the run store (Postgres slow or down)",
                backlog=self._pending,
                backlog_max=self.backlog_max,
            )
        with self._idle:
            return self._idle.wait_for(self.has_room, timeout)

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted message is acknowledged (or handed back)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < ACK_BATCH_MAX:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(item)
            try:
                ready = []
                for consumer, message, durable in batch:
                    if durable.wait(DURABLE_TIMEOUT_S):
                        ready.append((consumer, message))
                    else:
                        # The outcome could not be made durable: leave the message unacked; it
                        # comes back when this worker stops or is declared dead (at least once).
                        log.critical("run.ack_withheld", job_id=message.options.get("job_id"))
                if ready:
                    _ack_with_retry(ready)
            except Exception:  # never let one batch stop the acks of the others
                log.exception("run.ack_failed", messages=len(batch))
            finally:
                # message.fleet_durable -> outcome -> message is a reference cycle: break it so
                # each message is freed at once rather than at the next full collection.
                for _, message, _ in batch:
                    message.fleet_durable = None
                with self._idle:
                    self._pending -= len(batch)
                    self._idle.notify_all()


def _ack_with_retry(items: list[tuple[Any, Any]]) -> None:
    delay = 0.2
    while True:
        try:
            _ack_many(items)
            return
        except redis.ConnectionError as exc:
            # As Dramatiq's post_process_message does: retry until Redis answers. If the process
            # stops first, the messages come back and their finished runs make them no-ops.
            log.warning("run.ack_retry", messages=len(items), error=str(exc))
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _ack_many(items: list[tuple[Any, Any]]) -> None:
    """Acknowledge messages in one round trip: Dramatiq's own `ack` command (its dispatch
    script, same arguments as `RedisBroker._dispatch`) for each, in a pipeline."""
    broker = items[0][0].broker
    dispatch = broker.scripts["dispatch"]
    pipe = broker.client.pipeline(transaction=False)
    now = current_millis()
    for consumer, message in items:
        args = [
            "ack",
            now,
            consumer.queue_name,
            broker.broker_id,
            broker.heartbeat_timeout,
            broker.dead_message_ttl,
            0,  # no maintenance on acks (Dramatiq never does either)
            broker._max_unpack_size(),
            message.options["redis_message_id"],
        ]
        dispatch(keys=[broker.namespace], args=args, client=pipe)
    pipe.execute()
    for consumer, message in items:
        consumer.queued_message_ids.discard(message.message_id)


class FleetRedisConsumer(_RedisConsumer):
    def ack(self, message: Any) -> None:
        durable = getattr(message, "fleet_durable", None)
        if durable is None:
            super().ack(message)  # type: ignore[no-untyped-call]
            return
        # Its processing is over: it no longer counts against the prefetch (as with an
        # immediate ack), so the consumer keeps its threads fed while the ack waits.
        self.queued_message_ids.discard(message.message_id)
        self.broker.acker.submit(self, message, durable)

    def __next__(self) -> MessageProxy | None:
        try:
            while True:
                watch = self.broker.store_watch
                # The run store is down or not migrated: a message taken now could not be
                # started, only handed back (`db/watch.py`). Delayed messages (.DQ) need no
                # run store and keep moving.
                if watch and not self.queue_name.endswith(".DQ") and not watch.usable():
                    watch.wait(BACKLOG_WAIT_S)
                    return None
                try:
                    data = self.message_cache.pop(0)
                    if data is None:
                        continue
                    self.misses = 0
                    message = Message.decode(data)
                    self.queued_message_ids.add(message.message_id)
                    return MessageProxy(message)
                except IndexError:
                    messages = []
                    if not self.broker.acker.has_room():
                        # Back-pressure: wait for the run store, not counted as an idle miss.
                        self.broker.acker.wait_for_room(BACKLOG_WAIT_S)
                        return None
                    if self.outstanding_message_count < self.prefetch:
                        self.message_cache = messages = self.broker.do_fetch(
                            self.queue_name, self.prefetch - self.outstanding_message_count
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
        cached = [data for data in self.message_cache if data is not None]
        self.message_cache = []
        if cached:
            ids = [Message.decode(data).options["redis_message_id"] for data in cached]
            try:
                self.broker.do_requeue(self.queue_name, *ids)
                log.info("consumer.prefetch_returned", queue=self.queue_name, messages=len(ids))
            except redis.ConnectionError as exc:  # the heartbeat maintenance will return them
                log.warning("consumer.prefetch_not_returned", messages=len(ids), error=str(exc))
        super().close()

    def _idle_wait(self, backoff_ms: int) -> None:
        """Sleep for the back-off, unless a send to this queue wakes us first."""
        if self.queue_name.endswith(".DQ") or self.outstanding_message_count >= self.prefetch:
            time.sleep(backoff_ms / 1000)  # delayed messages, or no room: nothing to wake for
            return
        if backoff_ms < 2:
            return
        key = wake_key(self.broker.namespace, self.queue_name)
        if self.broker.client.blpop([key], timeout=backoff_ms / 1000):
            self.misses = 0
