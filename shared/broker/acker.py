"""Deferred acknowledgements: a message is acknowledged off the worker thread, once its
outcome is durable.

The tracking middleware hands a terminal outcome (COMPLETED, DEAD, ...) to the run writer's
durable lane and puts the pending write on the message's delivery (`delivery.py`) instead of
waiting for it. Dramatiq's worker thread then calls the consumer's `ack`; for such a message the
fleet consumer gives it to the process's `Acker`, whose thread acknowledges it once the row is
durable, and the worker thread takes its next message at once. "A message is acknowledged only
after its COMPLETED/DEAD row is durable" still holds; the durable lane's batches grow from the
number of worker threads to the number of messages in flight, so one fsync serves many more jobs.

The acknowledgements themselves are Dramatiq's own `ack` command (its dispatch script's: a
heartbeat, then SREM from the worker's unacknowledged set and HDEL of the data, on Dramatiq's
Redis key layout; see `version.py`), re-implemented in `lua/ack_many.lua` so that a batch is
one script call per queue (one heartbeat, no per-message arguments to pack) instead of one
dispatch call per message: measured, a third of the acker's CPU (bench/README.md).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
import structlog
from dramatiq.common import current_millis

from .delivery import Durable, delivery_of
from .scripts import source

log = structlog.get_logger("jobfleet.consumer")

#: Longest wait for a durable outcome before the message is handed back instead of acked.
DURABLE_TIMEOUT_S = 60.0
#: Most messages acknowledged in one Redis round trip.
ACK_BATCH_MAX = 256
#: Most finished messages a process holds while their outcomes are made durable: one full
#: statement of the run writer's durable lane (`TRACKING_BATCH_MAX`, whose default this is;
#: `build_broker` sets it from the settings). Past it, its consumers stop fetching until the
#: run store catches up: a slow Postgres slows the workers down instead of piling up
#: unacknowledged messages (and memory). More would not be written sooner, only held: each
#: waiting message costs ~5 KB of the process's heap, which Python keeps after the backlog
#: drains, so a process's memory is set by the largest backlog it ever held (at 1,024, a
#: 4-6 MB step at the first slow commit; bench/README.md, memory.py).
ACK_BACKLOG_MAX = 256
#: Dramatiq's "ack" command for many messages of one queue (`_ack_many`).
ACK_MANY = source("ack_many.lua")
#: Least time between two "fetching paused" log lines of one process.
BACKLOG_LOG_EVERY_S = 30.0


class Acker:
    """Acknowledges messages once their outcome is durable, in one thread per process."""

    def __init__(self, *, backlog_max: int = ACK_BACKLOG_MAX) -> None:
        self.backlog_max = backlog_max
        self._logged_full = -BACKLOG_LOG_EVERY_S
        self._queue: queue.SimpleQueue[tuple[Any, Any, Durable] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Condition(self._lock)

    def submit(self, consumer: Any, message: Any, durable: Durable) -> None:
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
                ready, back = [], []
                for consumer, message, durable in batch:
                    if durable.wait(DURABLE_TIMEOUT_S):
                        ready.append((consumer, message))
                    else:
                        # The outcome could not be made durable, nor a copy enqueued to record
                        # it later: the message goes back on its queue (at least once). Left
                        # unacknowledged, it came back only when this worker stopped or died.
                        log.critical("run.ack_withheld", job_id=message.options.get("job_id"))
                        back.append((consumer, message))
                if ready:
                    _retry_until_redis_answers(_ack_many, ready)
                if back:
                    _retry_until_redis_answers(_hand_back, back)
            except Exception:  # never let one batch stop the acks of the others
                log.exception("run.ack_failed", messages=len(batch))
            finally:
                # delivery.durable -> outcome -> message is a reference cycle: break it so
                # each message is freed at once rather than at the next full collection.
                for _, message, _ in batch:
                    delivery_of(message).durable = None
                with self._idle:
                    self._pending -= len(batch)
                    self._idle.notify_all()


def _retry_until_redis_answers(
    action: Callable[[list[tuple[Any, Any]]], None], items: list[tuple[Any, Any]]
) -> None:
    """`action(items)`, again and again while Redis is unreachable."""
    delay = 0.2
    while True:
        try:
            action(items)
            return
        except redis.ConnectionError as exc:
            # As Dramatiq's post_process_message does: retry until Redis answers. If the process
            # stops first, the messages come back and their finished runs make them no-ops.
            log.warning(
                "run.ack_retry", action=action.__name__, messages=len(items), error=str(exc)
            )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _hand_back(items: list[tuple[Any, Any]]) -> None:
    """Put messages back on their queues (Dramatiq's "requeue" command, per queue)."""
    by_consumer: dict[Any, list[str]] = {}
    for consumer, message in items:
        by_consumer.setdefault(consumer, []).append(message.options["redis_message_id"])
    for consumer, ids in by_consumer.items():
        consumer.broker.do_requeue(consumer.queue_name, *ids)
    for consumer, message in items:
        consumer.queued_message_ids.discard(message.message_id)


def _ack_many(items: list[tuple[Any, Any]]) -> None:
    """Acknowledge messages with one `lua/ack_many.lua` call per queue (Dramatiq's `ack` command
    for each of its messages): one round trip per queue. Not in a pipeline: redis-py asks
    `SCRIPT EXISTS` before each execution of a pipeline holding a script, a second round trip
    per batch; a script called as is runs EVALSHA and loads itself only when Redis lacks it."""
    broker = items[0][0].broker
    script = broker.__dict__.get("fleet_ack_many")
    if script is None:
        script = broker.__dict__["fleet_ack_many"] = broker.client.register_script(ACK_MANY)
    by_queue: dict[str, list[str]] = {}
    for consumer, message in items:
        redis_id = message.options.get("redis_message_id")
        if redis_id is None:  # cannot happen for a fetched message (`_decode` sets it)
            log.error("run.ack_without_redis_id", message_id=message.message_id)
            continue
        by_queue.setdefault(consumer.queue_name, []).append(redis_id)
    now = current_millis()
    for queue_name, ids in by_queue.items():
        script(keys=[broker.namespace], args=[now, queue_name, broker.broker_id, *ids])
    for consumer, message in items:
        consumer.queued_message_ids.discard(message.message_id)
