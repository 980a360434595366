"""Pausing a queue fleet-wide: its consumers stop taking messages, sends keep being accepted.

An operator pauses a queue during an incident (for example a provider banning us or down,
a bad deploy of one domain) without stopping its workers, then resumes it. The state lives in
Redis (`<namespace>:jobfleet:paused-queues`, a hash queue -> JSON {by, reason, at}, on the Redis
that carries the queue: REDIS_QUEUE_URLS), so it holds across worker restarts and for every
process; each pause and resume is audited in Postgres (`pause_audit`: who, when, why).

While a queue is paused:
- sends are accepted as usual (QUEUED runs, visible);
- every process's consumers of that queue stop fetching within `REFRESH_S` (they re-read the
  hash at most that often; nothing polls while no queue is paused but that re-read) and hand
  back what they prefetched; a message already handed to Dramatiq's worker queue is handed back
  by the tracking middleware before it starts (`PausedQueue`); neither counts as an attempt;
- jobs already running finish; their retries come back to the paused queue and wait there.
Resuming deletes the field; consumers fetch again within `REFRESH_S`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis
import structlog

from .errors import FleetError, TrackingUnavailable

if TYPE_CHECKING:
    from .queue_servers import QueueServers
    from .runtime import Runtime

log = structlog.get_logger("jobfleet.pauses")

#: Longest a process works from a stale view of which queues are paused.
REFRESH_S = 0.5


def paused_key(namespace: str) -> str:
    return f"{namespace}:jobfleet:paused-queues"


@dataclass(frozen=True)
class QueuePause:
    queue: str
    by: str
    reason: str
    at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "by": self.by,
            "reason": self.reason,
            "at": self.at.isoformat(),
        }


def _parse(queue: str, raw: bytes | str) -> QueuePause:
    data = json.loads(raw)
    return QueuePause(queue, data["by"], data["reason"], datetime.fromisoformat(data["at"]))


def paused_queues(client: redis.Redis, namespace: str) -> dict[str, QueuePause]:
    raw: dict[bytes, bytes] = client.hgetall(paused_key(namespace))  # type: ignore[assignment]
    return {k.decode(): _parse(k.decode(), v) for k, v in sorted(raw.items())}


def paused_everywhere(servers: QueueServers, namespace: str) -> dict[str, QueuePause]:
    """The paused queues of every Redis server of the fleet (REDIS_QUEUE_URLS): each queue's
    pause is kept on the server that carries it (its workers read it there)."""
    found: dict[str, QueuePause] = {}
    for client in servers.all():
        for queue, pause in paused_queues(client, namespace).items():
            if servers.client(queue) is client:
                found[queue] = pause
    return dict(sorted(found.items()))


def pause_queue(
    client: redis.Redis,
    namespace: str,
    queue: str,
    *,
    by: str,
    reason: str,
    now: datetime | None = None,
) -> tuple[QueuePause, bool]:
    """Pause `queue`; returns the pause in force and whether this call paused it (False: it
    was paused already, and the first pause's who/why/when are kept)."""
    pause = QueuePause(queue, by, reason, now or datetime.now(UTC))
    fields = {"by": by, "reason": reason, "at": pause.at.isoformat()}
    if client.hsetnx(paused_key(namespace), queue, json.dumps(fields)):
        return pause, True
    return paused_queues(client, namespace)[queue], False


def resume_queue(client: redis.Redis, namespace: str, queue: str) -> QueuePause | None:
    """Resume `queue`; returns the pause it ended (None: it was not paused)."""
    key = paused_key(namespace)
    pipe = client.pipeline(transaction=True)
    pipe.hget(key, queue)
    pipe.hdel(key, queue)
    raw, _ = pipe.execute()
    return _parse(queue, raw) if raw else None


class PauseWatch:
    """A process's view of the paused queues, re-read at most every `refresh_s` (shared by its
    consumers and its tracking middleware: one HGETALL per period whatever their number)."""

    def __init__(
        self,
        read: Callable[[], set[str]],
        *,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self.refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._paused: frozenset[str] = frozenset()
        self._read_at = -refresh_s

    @classmethod
    def of(cls, client: redis.Redis, namespace: str) -> PauseWatch:
        key = paused_key(namespace)
        return cls(lambda: {k.decode() for k in client.hkeys(key)})  # type: ignore[union-attr]

    def paused(self, queue: str) -> bool:
        """Is `queue` paused? (Its delay queue `<queue>.DQ` is not: due messages keep moving
        into the paused queue, where they wait.)"""
        if self._clock() - self._read_at >= self.refresh_s and self._lock.acquire(blocking=False):
            try:
                self._refresh()
            finally:
                self._lock.release()
        return queue in self._paused

    def _refresh(self) -> None:
        self._read_at = self._clock()
        try:
            paused = frozenset(self._read())
        except redis.RedisError:
            return  # keep the last view; the consumer's own fetch will meet the outage
        for queue in sorted(paused - self._paused):
            log.warning("queue.paused_here", queue=queue)
        for queue in sorted(self._paused - paused):
            log.info("queue.resumed_here", queue=queue)
        self._paused = paused

    def wait(self, timeout: float) -> None:
        """Sleep until the next re-read is due, at most `timeout` seconds."""
        time.sleep(max(0.01, min(timeout, self._read_at + self.refresh_s - self._clock())))


# -- Operator actions: validated, applied in Redis, audited in Postgres ----------------------


class UnknownQueue(FleetError):
    """No job of the fleet is sent to that queue."""

    code = "UNKNOWN_QUEUE"


def redis_client(runtime: Runtime) -> redis.Redis:
    """The home Redis (REDIS_URL): the scheduler's records, locks, anything of no one queue."""
    client: redis.Redis = runtime.broker.client  # type: ignore[attr-defined]  # the Redis broker's
    return client


def queue_client(runtime: Runtime, queue: str) -> redis.Redis:
    """The Redis that carries `queue` (REDIS_QUEUE_URLS), where its pause is kept."""
    return runtime.queue_servers.client(queue)


def _known(queue: str, known: Sequence[str] | None) -> None:
    if known is None:
        from .jobs import catalog

        known = catalog.QUEUES
    if queue not in known:
        raise UnknownQueue(f"unknown queue {queue!r}; known: {', '.join(known)}")


def audit(runtime: Runtime, *, kind: str, target: str, action: str, by: str, reason: str) -> None:
    try:
        with runtime.pool.connection() as conn:
            conn.execute("SET LOCAL synchronous_commit TO on")
            conn.execute(
                "INSERT INTO pause_audit (kind, target, action, actor, reason) VALUES (%s, %s, %s, %s, %s)",
                (kind, target, action, by, reason),
            )
    except Exception as exc:
        raise TrackingUnavailable(
            f"{action} of {kind} {target} is in force, but its audit could not be recorded: {exc}"
        ) from exc


def pause(
    runtime: Runtime, queue: str, *, by: str, reason: str, known: Sequence[str] | None = None
) -> tuple[QueuePause, bool]:
    """Pause `queue` fleet-wide (see the module docstring) and audit it when this call paused it.
    `known`: the queues that may be paused (default: every queue of the job catalog)."""
    _known(queue, known)
    settings = runtime.settings
    pause_info, changed = pause_queue(
        queue_client(runtime, queue), settings.broker_namespace, queue, by=by, reason=reason
    )
    if changed:
        # The action is audited; the workers warn as they stop (`queue.paused_here`).
        log.info("queue.paused", queue=queue, by=by, reason=reason)
        audit(runtime, kind="queue", target=queue, action="pause", by=by, reason=reason)
    return pause_info, changed


def resume(
    runtime: Runtime, queue: str, *, by: str, reason: str = "", known: Sequence[str] | None = None
) -> QueuePause | None:
    """Resume `queue`; audited when it was paused. Returns the pause it ended."""
    _known(queue, known)
    ended = resume_queue(queue_client(runtime, queue), runtime.settings.broker_namespace, queue)
    if ended is not None:
        log.info("queue.resumed", queue=queue, by=by, reason=reason, paused_by=ended.by)
        audit(runtime, kind="queue", target=queue, action="resume", by=by, reason=reason)
    return ended


def history(
    runtime: Runtime, *, target: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    sql = "SELECT kind, target, action, actor, reason, at FROM pause_audit"
    params: list[Any] = []
    if target is not None:
        sql += " WHERE target = %s"
        params.append(target)
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql + " ORDER BY at DESC, id DESC LIMIT %s", [*params, limit]).fetchall()
