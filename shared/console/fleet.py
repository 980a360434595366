"""The Overview's figures: queues, durations, workers, periodic jobs, outbox, DLQ alert (the
domains add their cards: `plugins.py`).

Each section is read on its own and degrades on its own (an unreachable source shows its error,
the others still show), as in `fleet status`. Everything here is a few index reads: the page
polls every `CONSOLE_REFRESH_S`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from .. import limits, periodic
from ..jobs import catalog
from ..observability import probes
from ..pauses import paused_everywhere, redis_client
from ..queue_servers import label, server_of
from ..runtime import Runtime

Section = dict[str, Any]


def guard(section: Callable[[], Any]) -> Any:
    try:
        return section()
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return {"error": f"{type(exc).__name__}: {first}"}


def _org_scope(orgs: Sequence[UUID], column: str = "org_id") -> tuple[str, list[Any]]:
    return (f" AND {column} = ANY(%s)", [list(orgs)]) if orgs else ("", [])


def queues(runtime: Runtime, orgs: Sequence[UUID] = ()) -> list[Section]:
    """Per queue: ready and delayed (Redis, on the server that carries the queue:
    REDIS_QUEUE_URLS), running and dead (job_runs), finished in the last minute, paused or not
    (who, why, since when), and which Redis server carries it."""
    ns = runtime.settings.broker_namespace
    depths = probes.queue_lengths(runtime.queue_servers, ns, catalog.QUEUES)  # every lane of each
    paused = paused_everywhere(runtime.queue_servers, ns)
    limited = {
        q: limits.queue_limits(runtime.queue_servers.client(q), runtime.settings, q)
        for q in catalog.QUEUES
    }
    scope, params = _org_scope(orgs)
    with runtime.pool.connection() as conn:
        counts = conn.execute(
            "SELECT queue, status, count(*) FROM job_runs WHERE status IN ('RUNNING', 'DEAD')"
            f"{scope} GROUP BY queue, status",
            params,
        ).fetchall()
        rate = conn.execute(
            "SELECT queue, count(*) FROM job_runs WHERE finished_at >= now() - interval '1 minute'"
            f"{scope} GROUP BY queue",
            params,
        ).fetchall()
    by = {(q, s): n for q, s, n in counts}
    per_minute: dict[str, int] = {q: n for q, n in rate}
    names = list(catalog.QUEUES) + sorted({q for q, _ in by} - set(catalog.QUEUES))
    rows = []
    for q in names:
        known = q in depths
        rows.append(
            {
                "queue": q,
                "ready": depths[q][0] if known else None,
                "delayed": depths[q][1] if known else None,
                "running": by.get((q, "RUNNING"), 0),
                "dead": by.get((q, "DEAD"), 0),
                "per_minute": per_minute.get(q, 0),
                "paused": paused[q].as_dict() if q in paused else None,
                "limits": limits.summary(limited[q].as_dict(), busiest=False) if known else "",
                "known": known,
                "server": label(server_of(runtime.settings, q)) if known else None,
            }
        )
    return rows


#: The durations read at most this many of the last hour's runs (the latest): the Overview's
#: cost stays bounded whatever the throughput (at 100 jobs/s an hour is 360,000 runs).
DURATION_SAMPLE = 20_000


def durations(runtime: Runtime, orgs: Sequence[UUID] = ()) -> list[Section]:
    """Per job name, runs finished in the last hour (at most the latest `DURATION_SAMPLE`):
    how many, dead, p50 and p95 of started -> finished (ms). An index-only scan of
    `ix_job_runs_finished_at_job` (with an org scope: rows), one sort per job name."""
    scope, params = _org_scope(orgs)
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            """
            SELECT job_name, count(*) AS runs,
                   count(*) FILTER (WHERE status = 'DEAD') AS dead,
                   percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY d) AS p
              FROM (SELECT job_name, status,
                           extract(epoch FROM finished_at - started_at) * 1000 AS d
                      FROM job_runs
                     WHERE finished_at IS NOT NULL AND finished_at >= now() - interval '1 hour'
            """
            + scope
            + """
                     ORDER BY finished_at DESC LIMIT %s) AS f
             GROUP BY job_name ORDER BY job_name
            """,
            [*params, DURATION_SAMPLE],
        ).fetchall()
    sampled = sum(r["runs"] for r in rows) >= DURATION_SAMPLE
    return [
        {
            "job_name": r["job_name"],
            "runs": r["runs"],
            "dead": r["dead"],
            "p50_ms": (r["p"] or [None, None])[0],
            "p95_ms": (r["p"] or [None, None])[1],
            "sampled": sampled,
        }
        for r in rows
    ]


def heartbeats(runtime: Runtime) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Every process's last heartbeat (broker id -> ms), and the dead consumer threads each
    reported (broker id -> {queues, at}), from every Redis server of the queues."""
    beats, dead_raw = probes.heartbeats(runtime.queue_servers, runtime.settings.broker_namespace)
    return (
        {(m.decode() if isinstance(m, bytes) else str(m)): float(s) for m, s in beats},
        {k.decode(): json.loads(v) for k, v in dead_raw.items()},
    )


def workers(runtime: Runtime, state_file: Path, *, now_ms: float | None = None) -> Section:
    """Consumers with their last heartbeat (alive: younger than the heartbeat timeout), dead
    consumer threads, and the processes `make run` supervises (from its state file)."""
    settings = runtime.settings
    beats, dead_raw = heartbeats(runtime)
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    consumers: list[dict[str, Any]] = [
        {
            "id": member,
            "age_s": round((now_ms - score) / 1000, 1),
            "alive": now_ms - score < settings.heartbeat_timeout_ms,
        }
        for member, score in beats.items()
    ]
    dead = {
        k: v["queues"]
        for k, v in dead_raw.items()
        if now_ms - float(v["at"]) < settings.heartbeat_timeout_ms
    }
    processes: list[Section] = []
    if state_file.exists():
        state = json.loads(state_file.read_text())
        processes = [
            {k: p.get(k) for k in ("name", "pid", "restarts", "health_url")}
            for p in state.get("processes", [])
        ]
    return {
        "alive": sum(c["alive"] for c in consumers),
        "stale": sum(not c["alive"] for c in consumers),
        "consumers": sorted(consumers, key=lambda c: c["age_s"])[:20],
        "dead_consumers": dead,
        "processes": processes,
    }


def known_periodic(runtime: Runtime, extra: Sequence[str] = ()) -> list[str]:
    """The scheduler's periodic jobs, as its replicas report them in Redis (each records its
    runs there), plus `extra` (the console's configuration). The kernel names no job itself."""
    client = redis_client(runtime)
    ns = runtime.settings.broker_namespace
    found: set[str] = set(extra)
    for what in ("runs", "paused"):
        found |= {k.decode() for k in client.hkeys(f"{ns}:jobfleet:schedule:{what}")}  # type: ignore[union-attr]
    return sorted(found)


def scheduler(runtime: Runtime, names: Sequence[str]) -> list[Section]:
    states = periodic.states(redis_client(runtime), runtime.settings.broker_namespace, names)
    return [s.as_dict() for s in states]


def outbox(runtime: Runtime, orgs: Sequence[UUID] = ()) -> Section:
    scope, params = _org_scope(orgs)
    with runtime.pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'PENDING'), count(*) FILTER (WHERE status = 'FAILED'),"
            " extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'PENDING'))"
            f" FROM outbox_events WHERE status IN ('PENDING', 'FAILED'){scope}",
            params,
        ).fetchone()
    assert row is not None
    return {"pending": row[0], "failed": row[1],
            "oldest_pending_s": None if row[2] is None else round(float(row[2]), 1)}  # fmt: skip


def dlq_alert(queue_rows: Any, threshold: int) -> Section:
    """Queues over the maintenance threshold of dead runs (the `jobfleet_dlq_alert` rule)."""
    if not isinstance(queue_rows, list):
        return {"error": "queues unreadable"}
    over = [q["queue"] for q in queue_rows if q["dead"] > threshold]
    dead = sum(q["dead"] for q in queue_rows)
    return {"threshold": threshold, "over": over, "dead": dead, "firing": bool(over)}


def overview(
    runtime: Runtime,
    *,
    state_file: Path,
    orgs: Sequence[UUID] = (),
    periodic_jobs: Sequence[str] = (),
) -> Section:
    q = guard(lambda: queues(runtime, orgs))
    names = guard(lambda: known_periodic(runtime, periodic_jobs))
    return {
        "queues": q,
        "alert": dlq_alert(q, runtime.settings.maintenance_dlq_threshold),
        "durations": guard(lambda: durations(runtime, orgs)),
        "workers": guard(lambda: workers(runtime, state_file)),
        "scheduler": guard(lambda: scheduler(runtime, names)) if isinstance(names, list) else names,
        "outbox": guard(lambda: outbox(runtime, orgs)),
    }
