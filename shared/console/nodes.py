"""The Nodes page: each worker process, what it runs now, and what a stale heartbeat was.

Three sources, joined by the process's broker id and its lease owner:
- Dramatiq's heartbeats (`<namespace>:__heartbeats__`: broker id -> last beat), the liveness;
- the workers' own records (`shared/broker/nodes.py`: host, pid, service, queues, threads,
  started, stopped), what each id is;
- the RUNNING runs (`job_runs.lease_owner`, `started_at`), what each process runs. A job shorter
  than the run writer's start linger reaches Postgres only with its outcome: what shows is
  every job running for longer than that (about a millisecond by default).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from ..broker import nodes
from ..runtime import Runtime
from . import fleet

#: RUNNING runs read at most (the page lists each process's, oldest first).
RUNNING_LIMIT = 500


def running(runtime: Runtime, orgs: Sequence[UUID] = ()) -> list[dict[str, Any]]:
    """The RUNNING runs (`ix_job_runs_console_status`), the latest queued first."""
    scope, params = ("AND org_id = ANY(%s)", [list(orgs)]) if orgs else ("", [])
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT job_id, job_name, org_id, queue, attempt, started_at, lease_owner, lease_until,"
            " progress FROM job_runs WHERE status = 'RUNNING' " + scope
            + " ORDER BY queued_at DESC LIMIT %s",
            [*params, RUNNING_LIMIT],
        ).fetchall()  # fmt: skip


def _state(beat_ms: float | None, node: nodes.Node | None, now_ms: float, timeout: int) -> str:
    if beat_ms is not None and now_ms - beat_ms < timeout:
        return "alive"
    if node is not None and node.stopped_ms is not None:
        return "stopped"
    return "stale" if beat_ms is not None else "gone"


def explain(state: str, node: nodes.Node | None, age_s: float | None, timeout_s: float) -> str:
    """One sentence on a process that is not alive: what it was and what happens now."""
    what = (
        f"{node.service or 'a worker'} (pid {node.pid} on {node.host}, queues"
        f" {', '.join(node.queues) or 'none'})"
        if node is not None
        else "a process that left no record (it started before processes recorded themselves,"
        " or it is not a jobfleet worker)"
    )
    if state == "stopped":
        return (
            f"Was {what}; it stopped cleanly. Its heartbeat stays until the next queue"
            " maintenance removes it."
        )
    if state == "stale":
        return (
            f"Was {what}; silent for {age_s:.0f} s (dead past {timeout_s:.0f} s): killed, frozen"
            " or cut off. Its unacknowledged messages are requeued by the next maintenance of a"
            " live worker, which then removes this heartbeat."
        )
    if state == "gone":
        return f"Was {what}; its heartbeat is gone (its messages were requeued)."
    return ""


def page(
    runtime: Runtime, *, orgs: Sequence[UUID] = (), now_ms: float | None = None
) -> dict[str, Any]:
    settings = runtime.settings
    ns = settings.broker_namespace
    beats, dead_raw = fleet.heartbeats(runtime)
    records = {  # a worker records itself on its queues' Redis server, as it beats
        n.id: n for client in runtime.queue_servers.all() for n in nodes.read(client, ns)
    }
    dead_threads = {k: v["queues"] for k, v in dead_raw.items()}
    runs = running(runtime, orgs)
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    timeout = settings.heartbeat_timeout_ms
    by_owner: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_owner.setdefault(run["lease_owner"] or "", []).append(run)
    rows = []
    for node_id in sorted(set(beats) | set(records)):
        node, beat = records.get(node_id), beats.get(node_id)
        age_s = None if beat is None else round((now_ms - beat) / 1000, 1)
        state = _state(beat, node, now_ms, timeout)
        rows.append(
            {
                "id": node_id,
                "node": node,
                "state": state,
                "age_s": age_s,
                "started_s": None if node is None else (now_ms - node.started_ms) / 1000,
                "running": by_owner.pop(node.lease_owner, []) if node is not None else [],
                "dead_threads": dead_threads.get(node_id, []),
                "why": explain(state, node, age_s, timeout / 1000),
            }
        )
    order = {"alive": 0, "stale": 1, "stopped": 2, "gone": 3}
    rows.sort(key=lambda r: (order[r["state"]], r["node"].service if r["node"] else "~", r["id"]))
    return {
        "nodes": rows,
        "alive": sum(r["state"] == "alive" for r in rows),
        "not_alive": sum(r["state"] != "alive" for r in rows),
        "orphans": [r for owner_runs in by_owner.values() for r in owner_runs],
        "running_total": len(runs),
        "running_capped": len(runs) >= RUNNING_LIMIT,
        "timeout_s": timeout / 1000,
    }
