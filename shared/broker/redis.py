"""The Redis broker, tuned so that a dead worker's messages come back within seconds.

Stock Dramatiq runs queue maintenance (requeueing the unacked messages of dead workers) on a
random 0.1 % of commands and declares a worker dead after 60 s of silence: measured here, a
SIGKILLed worker's message came back after 1,021 s. Here maintenance runs only when asked:
`middleware.heartbeat` beats every `heartbeat_interval_ms` (even when all the threads are busy
with long jobs) and `beat` runs the maintenance when a worker is dead. Idle, a process costs a
few Redis commands per second (bench/idle_cost.py): its consumers block on a wake list that
every enqueue pushes to (`consumer.py`).

A subclass of Dramatiq's `RedisBroker` that overrides its private `_should_do_maintenance`
and calls its `do_<command>` dispatch (see `version.py`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import dramatiq
import structlog
from dramatiq.brokers.redis import RedisBroker
from dramatiq.common import current_millis

from ..config import Settings
from ..db.watch import RunStoreWatch
from ..pauses import PauseWatch
from . import lanes
from .acker import Acker
from .consumer import FleetRedisConsumer, wake_key

log = structlog.get_logger("jobfleet.broker")

#: The full queue maintenance of `beat` runs at least this often (dead-letter expiry).
MAINTAIN_EVERY_S = 60.0
#: Dead workers one beat looks at (enough to tell a new one from those already handled).
DEAD_LOOKED_AT = 16


class FleetRedisBroker(RedisBroker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        #: Acknowledges messages whose outcome is being made durable (`acker.py`).
        self.acker = Acker()
        #: Set by a worker's bootstrap: consumers fetch only while the run store is usable.
        self.store_watch: RunStoreWatch | None = None
        #: Set by a worker's bootstrap: consumers of a paused queue take nothing (`pauses.py`).
        self.pause_watch: PauseWatch | None = None
        self._beat_lock = threading.Lock()
        #: `time.monotonic()` at which the last beat that Redis answered was sent (None: never).
        self._last_beat: float | None = None
        #: No requeueing of other workers' messages before this `time.monotonic()`.
        self._hold_until = 0.0
        #: `beat`: the dead workers seen at the last full maintenance, and when it ran.
        self._dead_seen: frozenset[bytes] = frozenset()
        self._maintained_at = -MAINTAIN_EVERY_S
        #: Queue -> the concurrency limits the settings give it, as `lua/fetch.lua` reads
        #: them (JSON; `lanes.settings_limits`).
        self.fair_limits: dict[str, str] = {}
        #: Set by `build_broker` for a worker: raises when a queue is on another Redis server.
        self.server_check: Callable[[str], object] | None = None
        #: The Redis server of `client` (REDIS_URL's, or its queues', shared/queue_servers.py).
        self.server: tuple[str, str | None] | None = None

    def declare_queue(self, queue_name: str) -> None:
        """An actor of a queue that another Redis server carries (REDIS_QUEUE_URLS) would
        never see a message: refused at boot, with where each queue is."""
        if self.server_check is not None and queue_name not in self.queues:
            self.server_check(queue_name)
        super().declare_queue(queue_name)

    @property
    def consumer_class(self) -> type[FleetRedisConsumer]:
        return FleetRedisConsumer

    def _should_do_maintenance(self, command: str) -> int:
        # `qsize` is only issued by the heartbeat thread and the metrics collector.
        return int(command == "qsize" and time.monotonic() >= self._hold_until)

    def maintain(self, queue_name: str) -> int:
        """Beat this worker's heartbeat, requeue dead workers' messages; returns the queue size.

        After this process lost Redis for longer than half the heartbeat timeout (an outage, a
        frozen server, a partition), every other worker's last beat is just as old: declaring
        them dead now would run their in-flight jobs a second time, concurrently. So it only
        beats, for one heartbeat timeout, which gives every live worker time to beat again;
        a worker still silent after that is dead.
        """
        sent = self._beat_starts()
        size = int(self.do_qsize(queue_name))
        self._beat_done(sent)
        return size

    def beat(self, queues: Sequence[str]) -> None:
        """One heartbeat period of this process (`middleware.heartbeat`): a ZADD and a look for
        a dead worker, in one round trip. The full maintenance (`maintain`, six commands or
        more per queue) runs only when a worker is dead (at once for a newly dead one, then at
        most once per heartbeat timeout while it stays listed), and every `MAINTAIN_EVERY_S`
        for the dead-letter sets' expiry. Before: `maintain` for every queue every period
        (~20 commands per second per process, idle); now 2."""
        sent = self._beat_starts()
        now_ms = current_millis()
        key = f"{self.namespace}:__heartbeats__"
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(key, {self.broker_id: now_ms})
        pipe.zrangebyscore(key, 0, now_ms - self.heartbeat_timeout, start=0, num=DEAD_LOOKED_AT)
        _, dead = pipe.execute()
        self._beat_done(sent)
        dead_ids = frozenset(dead)
        since = sent - self._maintained_at
        due = since >= MAINTAIN_EVERY_S or (
            dead_ids and (dead_ids != self._dead_seen or since >= self.heartbeat_timeout / 1000)
        )
        if not due or sent < self._hold_until:
            return
        self._dead_seen, self._maintained_at = dead_ids, sent
        for queue in queues:
            if self.maintain(queue) and dead_ids:
                # Requeued messages came with no wake-up token: wake an idle consumer.
                self.wake(queue)

    def do_enqueue(self, queue_name: str, redis_id: str, data: bytes) -> None:
        """Dramatiq's "enqueue" command (a retry or a delayed message coming due, a replay),
        into the message's lane (its org and priority) instead of the default lane."""
        lanes.enqueue(self, queue_name, redis_id, data)

    def do_ack(self, queue_name: str, *redis_ids: str) -> Any:
        lanes.release(self, queue_name, redis_ids)
        return self._command("ack")(queue_name, *redis_ids)

    def do_nack(self, queue_name: str, *redis_ids: str) -> Any:
        lanes.release(self, queue_name, redis_ids)
        return self._command("nack")(queue_name, *redis_ids)

    def do_requeue(self, queue_name: str, *redis_ids: str) -> Any:
        """Dramatiq's requeue (to the default lane, where the fetch finds each message's org),
        once the slots the messages held are given back."""
        lanes.release(self, queue_name, redis_ids)
        return self._command("requeue")(queue_name, *redis_ids)

    def do_qsize(self, queue_name: str) -> int:
        """Dramatiq's "qsize", which runs the queue maintenance here (`_should_do_maintenance`):
        the dead workers' messages are requeued, so their slots are given back first."""
        if self._should_do_maintenance("qsize"):
            lanes.release(self, queue_name, None)
        return int(self._command("qsize")(queue_name))

    def _command(self, name: str) -> Any:
        """Dramatiq's dispatch of the command `name` (what its `do_<name>` would call)."""
        return self._dispatch(name)  # type: ignore[no-untyped-call]

    def enqueue(self, message: Any, *, delay: int | None = None) -> Any:
        """Dramatiq's enqueue (retries, replays, a delayed message coming due), plus a token on
        the queue's wake list so that an idle consumer, blocked on it, starts it at once."""
        enqueued = super().enqueue(message, delay=delay)
        self.wake(enqueued.queue_name)
        return enqueued

    def wake(self, queue_name: str) -> None:
        """Push a wake-up token for `queue_name` (the list is capped, as `send`'s is)."""
        key = wake_key(self.namespace, queue_name)
        pipe = self.client.pipeline(transaction=False)
        pipe.lpush(key, "1")
        pipe.ltrim(key, 0, 7)
        pipe.execute()

    def process_wake_key(self) -> str:
        """A wake list of this process only: its idle consumers also wait on it, so that a
        shutdown wakes them at once instead of after their long wait."""
        return f"{self.namespace}:__wake__.{self.broker_id}"

    def wake_process(self, count: int) -> None:
        """Wake `count` idle consumers of this process (at shutdown)."""
        key = self.process_wake_key()
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(key, *(["1"] * max(count, 1)))
        pipe.expire(key, 60)
        pipe.execute()

    def _beat_starts(self) -> float:
        sent = time.monotonic()
        with self._beat_lock:
            if (
                self._last_beat is not None
                and sent - self._last_beat > self.heartbeat_timeout / 2000
            ):
                if sent >= self._hold_until:
                    log.warning("heartbeat.resumed", silent_s=round(sent - self._last_beat, 1))
                self._hold_until = max(self._hold_until, sent + self.heartbeat_timeout / 1000)
        return sent

    def _beat_done(self, sent: float) -> None:
        with self._beat_lock:
            self._last_beat = max(self._last_beat or 0.0, sent)


def build_broker(
    settings: Settings,
    *,
    middleware: Sequence[dramatiq.Middleware] = (),
    queues: Sequence[str] = (),
) -> FleetRedisBroker:
    """A broker on the Redis server of `queues` (a worker's: `QueuesOnSeveralServers` unless
    they share one, shared/queue_servers.py); without `queues`, on REDIS_URL's."""
    from ..queue_servers import QueuesOnSeveralServers, common_server
    from ..redis_conn import client  # REDIS_URL, or the master REDIS_SENTINELS name

    server = url, master = common_server(settings, queues)
    broker = FleetRedisBroker(
        client=client(settings, url=url, master=master),
        namespace=settings.broker_namespace,
        heartbeat_timeout=settings.heartbeat_timeout_ms,
        middleware=list(middleware),
    )
    broker.fair_limits = lanes.settings_limits(
        settings.org_concurrency, settings.org_concurrency_overrides
    )
    # At most one durable-lane statement of finished messages waits for its outcome (acker.py).
    broker.acker.backlog_max = settings.tracking_batch_max
    broker.server = server

    def server_check(queue: str) -> None:
        if common_server(settings, [*queues, queue]) != server:  # no `queues`: REDIS_URL's
            raise QueuesOnSeveralServers(
                f"queue {queue!r} is not on this worker's Redis server (REDIS_QUEUE_URLS): "
                "name it in the worker's queues (boot_worker) or move it"
            )

    broker.server_check = server_check
    return broker
