"""Readiness checks and scrape-time samples, shared by every process."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import psycopg
import redis

from ..broker import lanes
from ..config import Settings

if TYPE_CHECKING:
    from ..queue_servers import QueueServers


def redis_check(client: redis.Redis) -> Callable[[], None]:
    def check() -> None:
        client.ping()

    return check


def postgres_check(dsn: str) -> Callable[[], None]:
    """Postgres answers and is migrated (every head of the migration scripts; else "database
    not migrated: run `fleet db upgrade`")."""
    from ..db import schema

    def check() -> None:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            schema.check(conn)

    return check


def queue_lengths(
    servers: QueueServers, namespace: str, queues: Iterable[str]
) -> dict[str, tuple[int, int]]:
    """(ready, delayed) messages of each queue, read on each Redis server that carries some;
    ready counts every lane (shared/broker/lanes.py)."""
    found: dict[str, tuple[int, int]] = {}
    for client, on_server in servers.by_server(queues):
        waiting = lanes.ready(client, namespace, on_server)
        pipe = client.pipeline(transaction=False)
        for q in on_server:
            pipe.llen(f"{namespace}:{q}.DQ")
        delayed = pipe.execute()
        found.update({q: (waiting[q], delayed[i]) for i, q in enumerate(on_server)})
    return found


def heartbeats(
    servers: QueueServers, namespace: str
) -> tuple[list[tuple[bytes, float]], dict[bytes, bytes]]:
    """Every worker's last heartbeat and the dead consumer threads, from every Redis server of
    the queues (a worker beats on its queues' server)."""
    from ..broker import dead_consumers_key

    beats: list[tuple[bytes, float]] = []
    dead: dict[bytes, bytes] = {}
    for client in servers.all():
        beats += client.zrange(f"{namespace}:__heartbeats__", 0, -1, withscores=True)  # type: ignore[arg-type]
        dead.update(client.hgetall(dead_consumers_key(namespace)))  # type: ignore[arg-type]
    return beats, dead


def queue_depths(
    servers: QueueServers, settings: Settings, queues: Iterable[str]
) -> dict[tuple[str, str], float]:
    """Ready and delayed messages of each queue, read on the Redis that carries it; dead runs."""
    names = list(queues)
    depth: dict[tuple[str, str], float] = {}
    for q, (ready, delayed) in queue_lengths(servers, settings.broker_namespace, names).items():
        depth[(q, "ready")] = float(ready)
        depth[(q, "delayed")] = float(delayed)
    with psycopg.connect(settings.database_dsn, connect_timeout=2) as conn:
        rows = conn.execute(
            "SELECT queue, count(*) FROM job_runs WHERE status = 'DEAD' GROUP BY queue"
        ).fetchall()
    dead = {q: float(n) for q, n in rows}
    for q in names:
        depth[(q, "dead")] = dead.get(q, 0.0)
    return depth


def queues_paused(
    servers: QueueServers, settings: Settings, queues: Iterable[str]
) -> dict[tuple[str], float]:
    """1.0 for each queue an operator paused (`shared/pauses.py`), else 0.0."""
    from ..pauses import paused_everywhere

    paused = paused_everywhere(servers, settings.broker_namespace)
    return {(q,): float(q in paused) for q in queues}


def queue_backlog(client: redis.Redis, namespace: str, queue: str) -> dict[str, Any]:
    """What an autoscaler should scale `queue`'s workers on (KEDA's metrics-api trigger,
    compose/k8s): its ready messages under this fleet's BROKER_NAMESPACE, and 0 while an operator
    has paused it (its list keeps growing, but more workers would take nothing from it)."""
    from ..pauses import paused_key

    ready = lanes.ready(client, namespace, [queue])[queue]  # every lane of it
    paused = client.hexists(paused_key(namespace), queue)
    return {
        "queue": queue,
        "ready": int(ready),
        "paused": bool(paused),
        "backlog": 0 if paused else int(ready),
    }


def outbox_pending(settings: Settings) -> float:
    with psycopg.connect(settings.database_dsn, connect_timeout=2) as conn:
        row = conn.execute("SELECT count(*) FROM outbox_events WHERE status = 'PENDING'").fetchone()
    return float(row[0]) if row else 0.0
