"""Periodic upkeep of the run store, hosted by the scheduler (each step takes `now`).

- `purge_finished`: COMPLETED and CANCELED runs past retention are deleted (DEAD runs stay
  until an operator purges the DLQ).
- `dlq_report`: DEAD runs per queue; over the threshold → an error log and a gauge.
- `redeliver_stuck`: RUNNING runs older than their time limit (plus a grace) are flagged and
  their message enqueued again: the worker that held them is gone or wedged.
- `recover_lost`: QUEUED or FAILED runs whose job-id key is missing from Redis lost their
  message with it (a Redis restart without persistence): they are enqueued again. The key and
  the message live in the same Redis, so a present key means the message is there too.
Every step is safe to run in two scheduler replicas at once (row locks with SKIP LOCKED, and
the job-id gate for re-enqueues).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from prometheus_client import Gauge
from psycopg.rows import dict_row

from .jobs import catalog
from .jobs.gate import dedup_key
from .jobs.message import build_message
from .runtime import Runtime

log = structlog.get_logger("jobfleet.maintenance")

DLQ_ALERT = Gauge(
    "jobfleet_dlq_alert",
    "1 when a queue's dead runs exceed the threshold",
    ["queue"],
    multiprocess_mode="max",
)


def purge_finished(runtime: Runtime, *, now: datetime, batch: int = 5_000) -> int:
    cutoff = now - timedelta(days=runtime.settings.run_retention_days)
    with runtime.pool.connection() as conn:
        deleted = conn.execute(
            "DELETE FROM job_runs WHERE id IN (SELECT id FROM job_runs "
            "WHERE status IN ('COMPLETED', 'CANCELED') AND finished_at < %s LIMIT %s)",
            (cutoff, batch),
        ).rowcount
    if deleted:
        log.info("maintenance.purged", runs=deleted, before=cutoff.isoformat())
    return deleted


@dataclass(frozen=True)
class DlqReport:
    dead_by_queue: dict[str, int]
    over_threshold: list[str]


def dlq_report(runtime: Runtime, *, threshold: int) -> DlqReport:
    with runtime.pool.connection() as conn:
        rows = conn.execute(
            "SELECT queue, count(*) FROM job_runs WHERE status = 'DEAD' GROUP BY queue"
        ).fetchall()
    dead = {queue: int(n) for queue, n in rows}
    over = sorted(q for q, n in dead.items() if n > threshold)
    for queue in set(catalog.QUEUES) | set(dead):
        DLQ_ALERT.labels(queue).set(1 if queue in over else 0)
    for queue in over:
        log.error(
            "maintenance.dlq_over_threshold", queue=queue, dead=dead[queue], threshold=threshold
        )
    return DlqReport(dead, over)


def _time_limit_ms(runtime: Runtime, job_name: str) -> int:
    spec = catalog.BY_NAME.get(job_name)
    if spec is not None and spec.time_limit_ms is not None:
        return spec.time_limit_ms
    return runtime.settings.default_time_limit_ms


def redeliver_stuck(
    runtime: Runtime, *, now: datetime, grace_s: int = 60, limit: int = 500
) -> list[str]:
    """Flag RUNNING runs past their time limit and enqueue their message again."""
    shortest = min(
        [runtime.settings.default_time_limit_ms, *(s.time_limit_ms or 10**12 for s in catalog.ALL)]
    )
    horizon = now - timedelta(milliseconds=shortest, seconds=grace_s)
    redelivered: list[str] = []
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute("SET LOCAL synchronous_commit TO on")
        rows = cur.execute(
            "SELECT job_id, org_id, job_name, queue, entity_type, entity_id, payload, request_id, "
            "attempt, started_at FROM job_runs WHERE status = 'RUNNING' AND started_at < %s "
            "ORDER BY started_at LIMIT %s FOR UPDATE SKIP LOCKED",
            (horizon, limit),
        ).fetchall()
        for row in rows:
            deadline = row["started_at"] + timedelta(
                milliseconds=_time_limit_ms(runtime, row["job_name"]), seconds=grace_s
            )
            if deadline > now:
                continue
            message = _rebuild(row, attempt=row["attempt"] or 1)
            runtime.broker.enqueue(message)
            cur.execute(
                "UPDATE job_runs SET status = 'QUEUED', error_code = 'STUCK', message_id = %s, "
                "error = %s WHERE job_id = %s",
                (
                    message.message_id,
                    f"RUNNING since {row['started_at'].isoformat()}, past its time limit: redelivered",
                    row["job_id"],
                ),
            )
            redelivered.append(row["job_id"])
    for job_id in redelivered:
        log.warning("maintenance.stuck_redelivered", job_id=job_id)
    return redelivered


def recover_lost(
    runtime: Runtime, *, now: datetime, older_than_s: int = 300, limit: int = 1_000
) -> list[str]:
    """Enqueue again the QUEUED/FAILED runs whose message Redis no longer has."""
    horizon = now - timedelta(seconds=older_than_s)
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT job_id, org_id, job_name, queue, entity_type, entity_id, payload, request_id, attempt "
            "FROM job_runs WHERE status IN ('QUEUED', 'FAILED') AND job_id NOT LIKE 'raw:%%' "
            "AND COALESCE(next_retry_at, queued_at) < %s ORDER BY queued_at LIMIT %s",
            (horizon, limit),
        ).fetchall()
    if not rows:
        return []
    client = runtime.broker.client  # type: ignore[attr-defined]
    namespace = runtime.settings.broker_namespace
    pipe = client.pipeline(transaction=False)
    for row in rows:
        pipe.exists(dedup_key(namespace, row["job_id"]))
    present = pipe.execute()
    gate = runtime.sender.gate
    recovered: list[str] = []
    for row, exists in zip(rows, present, strict=True):
        if exists:
            continue
        message = _rebuild(row, attempt=max(1, row["attempt"] or 1))
        if gate.enqueue_once(message, row["job_id"]) is None:
            recovered.append(row["job_id"])
            log.warning(
                "maintenance.lost_message_recovered",
                job_id=row["job_id"],
                status_was="QUEUED/FAILED",
            )
    return recovered


def _rebuild(row: dict[str, Any], *, attempt: int) -> Any:
    spec = catalog.BY_NAME.get(row["job_name"])
    return build_message(
        job_name=row["job_name"],
        queue=spec.queue if spec else row["queue"],
        payload=row["payload"],
        job_id=row["job_id"],
        org_id=row["org_id"],
        entity_type=row["entity_type"],
        entity_id=row["entity_id"],
        request_id=row["request_id"],
        attempt=attempt,
    )
