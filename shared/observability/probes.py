"""Readiness checks and scrape-time samples, shared by every process."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import psycopg
import redis

from ..broker import lanes
from ..config import Settings


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


def queue_depths(
    client: redis.Redis, settings: Settings, queues: Iterable[str]
) -> dict[tuple[str, str], float]:
    ns = settings.broker_namespace
    depth: dict[tuple[str, str], float] = {}
    pipe = client.pipeline(transaction=False)
    names = list(queues)
    for q in names:
        pipe.llen(f"{ns}:{q}.DQ")
    values = pipe.execute()
    waiting = lanes.ready(client, ns, names)  # every lane (shared/broker/lanes.py)
    for i, q in enumerate(names):
        depth[(q, "ready")] = float(waiting[q])
        depth[(q, "delayed")] = float(values[i])
    with psycopg.connect(settings.database_dsn, connect_timeout=2) as conn:
        rows = conn.execute(
            "SELECT queue, count(*) FROM job_runs WHERE status = 'DEAD' GROUP BY queue"
        ).fetchall()
    dead = {q: float(n) for q, n in rows}
    for q in names:
        depth[(q, "dead")] = dead.get(q, 0.0)
    return depth


def queues_paused(
    client: redis.Redis, settings: Settings, queues: Iterable[str]
) -> dict[tuple[str], float]:
    """1.0 for each queue an operator paused (`shared/pauses.py`), else 0.0."""
    from ..pauses import paused_key

    paused = {k.decode() for k in client.hkeys(paused_key(settings.broker_namespace))}  # type: ignore[union-attr]
    return {(q,): float(q in paused) for q in queues}


def outbox_pending(settings: Settings) -> float:
    with psycopg.connect(settings.database_dsn, connect_timeout=2) as conn:
        row = conn.execute("SELECT count(*) FROM outbox_events WHERE status = 'PENDING'").fetchone()
    return float(row[0]) if row else 0.0
