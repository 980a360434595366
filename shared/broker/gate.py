"""Atomic dedup + enqueue in one Redis round trip.

The job id is claimed (SET NX with the dedup window as TTL) and the message enqueued by one
Lua script, so 1,000 concurrent sends of one job id give one message, and a send costs one
Redis round trip like a bare Dramatiq enqueue. `job_runs` keeps the unique job id for as long
as the run is retained: a message that slips through after the Redis key is gone (window over,
Redis data lost) finds its run finished when a worker starts it and is acknowledged unrun.

The script (`lua/enqueue_once.lua`) writes a message as Dramatiq's Redis broker stores it (its
private key layout: the `<queue>.msgs` hash and the `<queue>` list, the `.DQ` delay queue with an
`eta` option), or in its org's lane of its priority (`lanes.py`): it lives here, with the other
code that depends on Dramatiq's internals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import uuid4

import dramatiq
import redis
from dramatiq.common import current_millis, dq_name, q_name

from . import codec
from .lanes import ENQUEUE as SCRIPT
from .lanes import lane

if TYPE_CHECKING:
    from ..queue_servers import QueueServers


def dedup_key(namespace: str, job_id: str) -> str:
    return f"{namespace}:jobfleet:job-id:{job_id}"


class EnqueueGate:
    """`servers`: which Redis carries each queue (`shared/queue_servers.py`); without it, every
    queue is on the broker's. The job id's key is claimed on its queue's server, by the script
    that enqueues there."""

    def __init__(self, broker: Any, *, window_ms: int, servers: QueueServers | None = None) -> None:
        self.broker = broker
        self.namespace: str = broker.namespace
        self.window_ms = window_ms
        self.servers = servers
        self._script = broker.client.register_script(SCRIPT)

    def client(self, queue: str) -> redis.Redis:
        """The client of the server that carries `queue` (its delay queue `<queue>.DQ` too)."""
        if self.servers is None:
            client: redis.Redis = self.broker.client
            return client
        return self.servers.client(q_name(queue))

    def _clients(self) -> list[redis.Redis]:
        return [self.broker.client] if self.servers is None else self.servers.all()

    def enqueue_once(
        self, message: dramatiq.Message[Any], job_id: str, *, delay_ms: int | None = None
    ) -> str | None:
        """Enqueue `message` unless `job_id` is taken; returns the holder's message id if taken
        (by another message: a send whose reply was lost and that redis-py sent again finds
        the id taken by itself, and is enqueued)."""
        queue_name = message.queue_name
        options: dict[str, Any] = {**message.options, "redis_message_id": str(uuid4())}
        if delay_ms is not None:
            queue_name = dq_name(queue_name)
            options["eta"] = current_millis() + delay_ms
        # `Message.copy` as Dramatiq's does it, without `dataclasses.replace` (which looks the
        # fields up on every call: 2.6 µs, the constructor 1.5).
        message = dramatiq.Message(
            queue_name=queue_name,
            actor_name=message.actor_name,
            args=message.args,
            kwargs=message.kwargs,
            options=options,
            message_id=message.message_id,
            message_timestamp=message.message_timestamp,
        )
        self.broker.emit_before("enqueue", message, delay_ms)
        full = f"{self.namespace}:{queue_name}"
        keys_and_args = (
            dedup_key(self.namespace, job_id),
            f"{full}.msgs",
            full,
            f"{full}.wake",
            message.message_id,
            self.window_ms,
            options["redis_message_id"],
            codec.encode(message),
            # Its lane: its priority and org (`lanes.py`); a delay queue ignores them.
            *lane(message.options),
        )
        client = self.client(queue_name)
        try:
            # EVALSHA itself: redis-py's `Script.__call__` imports and checks for a pipeline
            # (a typing-Protocol isinstance) on every call, ~4 % of a send's CPU.
            holder = client.evalsha(self._script.sha, 4, *keys_and_args)
        except redis.exceptions.NoScriptError:  # a Redis restarted (or failed over) since
            holder = self._script(keys=keys_and_args[:4], args=keys_and_args[4:], client=client)
        if holder is not None:
            holder = holder.decode() if isinstance(holder, bytes) else str(holder)
            if holder != message.message_id:
                return holder
            # This very message holds the job id: the script ran, its reply was lost and
            # redis-py sent it again. It is enqueued, once; not a duplicate.
        self.broker.emit_after("enqueue", message, delay_ms)
        return None

    def forget(self, job_ids: list[str]) -> None:
        """Release job ids (their runs were purged), so they can be sent again (on every
        server: a job id's queue is not at hand, and deleting a missing key is free)."""
        for client in self._clients():
            for i in range(0, len(job_ids), 1_000):
                client.delete(*(dedup_key(self.namespace, j) for j in job_ids[i : i + 1_000]))

    def holds(self, job_id: str, queue: str | None = None) -> bool:
        """A send took `job_id` within the dedup window (its message is enqueued)."""
        key = dedup_key(self.namespace, job_id)
        if queue is not None:
            return bool(self.client(queue).exists(key))
        return any(client.exists(key) for client in self._clients())
