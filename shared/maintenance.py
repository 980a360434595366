"""Periodic upkeep of the run store, hosted by the scheduler (each step takes `now`).

- `ensure_partitions`: the day partitions of `job_runs` and `job_executions` exist ahead of
  today (migration 0020_partitioned_runs; a default partition catches the rest meanwhile).
- `drop_expired_partitions`: retention by whole days: a day partition past retention is
  dropped, the runs the cutoff does not reach (DEAD ones stay until an operator purges the DLQ,
  unfinished ones, ones finished since) and their executions moved to the default partition.
- `purge_finished`: COMPLETED and CANCELED runs past retention in the default partition are
  deleted row by row (few rows), and so are the PUBLISHED and CANCELED outbox events
  (FAILED ones stay to be seen: `fleet outbox list --status FAILED`).
- `dlq_report`: DEAD runs per queue; over the threshold → an error log and a gauge.
- `redeliver_stuck`: RUNNING runs whose lease ran out (their worker is dead or frozen) and
  whose message Redis lost are enqueued again (flagged `STUCK`).
- `recover_lost`: QUEUED or FAILED runs (and STAGED ones already published: the relay recorded
  their message id) whose job-id key is missing from Redis lost their message with it (a Redis restart without persistence): they are enqueued again. The key and
  the message live in the same Redis, so a present key means the message is there too.
- `recover`: both, every few seconds, as soon as a sentinel key shows that Redis lost its data.
Every enqueue goes through the job-id gate (claims the key): one message per run.
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

from .broker import dedup_key
from .jobs import catalog
from .jobs.message import build_message
from .runtime import Runtime

log = structlog.get_logger("jobfleet.maintenance")

DLQ_ALERT = Gauge(
    "jobfleet_dlq_alert",
    "1 when a queue's dead runs exceed the threshold",
    ["queue"],
    multiprocess_mode="max",
)


def ensure_partitions(runtime: Runtime) -> int:
    """Create the day partitions of `job_runs` and `job_executions` from today to
    `maintenance_partitions_ahead_days` later (migration 0020_partitioned_runs); a day's rows
    already in the default partition move into its new partition. Returns how many were made."""
    with runtime.pool.connection() as conn:
        row = conn.execute(
            "SELECT jobfleet_create_partitions(today, today + %s)"
            " FROM (SELECT (now() AT TIME ZONE 'UTC')::date AS today) AS t",
            (runtime.settings.maintenance_partitions_ahead_days,),
        ).fetchone()
    made = int(row[0]) if row else 0
    if made:
        log.info("maintenance.partitions_created", partitions=made)
    return made


def drop_expired_partitions(runtime: Runtime, *, now: datetime) -> list[str]:
    """Retention by whole days: drop every partition of `job_runs` and `job_executions` whose
    days all precede the cutoff's (UTC) day. The runs the cutoff does not reach (DEAD, not
    finished, finished after it) and their executions are copied into the default partitions
    first; `purge_finished` deletes them there when their time comes. Returns the partitions."""
    cutoff = now - timedelta(days=runtime.settings.run_retention_days)
    with runtime.pool.connection() as conn:
        rows = conn.execute("SELECT * FROM jobfleet_drop_partitions(%s)", (cutoff,)).fetchall()
    for name, kept in rows:
        log.info("maintenance.partition_dropped", partition=name, kept=kept, before=cutoff.date())
    return [name for name, _ in rows]


def purge_finished(runtime: Runtime, *, now: datetime, batch: int = 5_000) -> int:
    """Row by row, what retention by partition leaves: the finished runs past retention in the
    default partition (kept when their day was dropped, or written while no partition covered
    their day), and the published and canceled outbox events."""
    cutoff = now - timedelta(days=runtime.settings.run_retention_days)
    with runtime.pool.connection() as conn:
        deleted = conn.execute(
            "DELETE FROM job_runs_default WHERE id IN (SELECT id FROM job_runs_default "
            "WHERE status IN ('COMPLETED', 'CANCELED') AND finished_at < %s LIMIT %s)",
            (cutoff, batch),
        ).rowcount
        conn.execute(
            "DELETE FROM job_executions_default AS x WHERE started_at < %s AND NOT EXISTS "
            "(SELECT 1 FROM job_runs AS r WHERE r.job_id = x.job_id)",
            (cutoff,),
        )
        events = conn.execute(
            "DELETE FROM outbox_events WHERE id IN (SELECT id FROM outbox_events "
            "WHERE status IN ('PUBLISHED', 'CANCELED') AND created_at < %s LIMIT %s)",
            (cutoff, batch),
        ).rowcount
    if deleted or events:
        log.info(
            "maintenance.purged", runs=deleted, outbox_events=events, before=cutoff.isoformat()
        )
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


#: Period of `recover`, the quick check for a Redis that lost its data (scheduler).
RECOVERY_INTERVAL_S = 5.0
#: A QUEUED/FAILED run this old whose job-id key is gone lost its message. Its row is written
#: after its key and message (`send`), so a present row without a key is a lost message at
#: once; the few seconds cover a send whose row and claim are being written.
RECOVER_AFTER_S = 5


def redeliver_stuck(
    runtime: Runtime, *, now: datetime, grace_s: int = 60, limit: int = 500
) -> list[str]:
    """Enqueue again, through the job-id gate, the RUNNING runs whose execution is over for
    sure and whose message Redis lost.

    A RUNNING run's lease is renewed by the worker executing it; once the lease has run out
    (+ `grace_s`), that worker is dead or frozen. Its message then comes back by itself (the
    dead worker's unacknowledged messages are requeued by the heartbeat maintenance) unless
    Redis lost it, which the job-id key tells: the key and the message live in the same Redis.
    So only a run whose key is gone is enqueued again, by claiming the key: one message per
    run, whichever replica or step gets there first. Runs from before leases existed (no
    lease) count as over past their time limit + `grace_s`.
    """
    shortest = min(
        [runtime.settings.default_time_limit_ms, *(s.time_limit_ms or 10**12 for s in catalog.ALL)]
    )
    legacy_horizon = now - timedelta(milliseconds=shortest, seconds=grace_s)
    lease_horizon = now - timedelta(seconds=grace_s)
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT job_id, org_id, job_name, queue, entity_type, entity_id, payload, request_id, "
            "attempt, started_at, lease_until FROM job_runs WHERE status = 'RUNNING' "
            "AND (lease_until < %s OR (lease_until IS NULL AND started_at < %s)) "
            "ORDER BY started_at LIMIT %s",
            (lease_horizon, legacy_horizon, limit),
        ).fetchall()
    rows = [
        row
        for row in rows
        if row["lease_until"] is not None
        or row["started_at"]
        + timedelta(milliseconds=_time_limit_ms(runtime, row["job_name"]), seconds=grace_s)
        <= now
    ]
    if not rows:
        return []
    gate = runtime.sender.gate
    redelivered: list[str] = []
    for row, exists in zip(rows, _keys_exist(runtime, rows), strict=True):
        if exists:
            continue  # its message is still in Redis and comes back with its dead worker's
        # The interrupted execution counts as an attempt (as when its message comes back).
        message = _rebuild(row, attempt=(row["attempt"] or 0) + 1)
        if gate.enqueue_once(message, row["job_id"]) is not None:
            continue  # claimed meanwhile (another replica, a send): that message runs it
        with runtime.pool.connection() as conn:
            conn.execute("SET LOCAL synchronous_commit TO on")
            conn.execute(
                "UPDATE job_runs SET status = 'QUEUED', error_code = 'STUCK', message_id = %s, "
                "error = %s WHERE job_id = %s AND status = 'RUNNING'",
                (
                    message.message_id,
                    f"RUNNING since {row['started_at'].isoformat()}, its worker gone and its "
                    "message lost with Redis's data: redelivered",
                    row["job_id"],
                ),
            )
        redelivered.append(row["job_id"])
        log.warning("maintenance.stuck_redelivered", job_id=row["job_id"])
    return redelivered


def recover_lost(
    runtime: Runtime, *, now: datetime, older_than_s: int = RECOVER_AFTER_S, limit: int = 1_000
) -> list[str]:
    """Enqueue again, through the job-id gate, the QUEUED/FAILED runs whose message Redis no
    longer has (their job-id key is gone with it)."""
    horizon = now - timedelta(seconds=older_than_s)
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT job_id, org_id, job_name, queue, entity_type, entity_id, payload, request_id, attempt "
            "FROM job_runs WHERE (status IN ('QUEUED', 'FAILED') "
            "OR (status = 'STAGED' AND message_id IS NOT NULL)) AND job_id NOT LIKE 'raw:%%' "
            "AND COALESCE(next_retry_at, queued_at) < %s ORDER BY queued_at LIMIT %s",
            (horizon, limit),
        ).fetchall()
    if not rows:
        return []
    gate = runtime.sender.gate
    recovered: list[str] = []
    for row, exists in zip(rows, _keys_exist(runtime, rows), strict=True):
        if exists:
            continue
        message = _rebuild(row, attempt=max(1, row["attempt"] or 1))
        if gate.enqueue_once(message, row["job_id"]) is None:
            recovered.append(row["job_id"])
            log.warning(
                "maintenance.lost_message_recovered",
                job_id=row["job_id"],
                status_was="QUEUED/FAILED/STAGED",
            )
    return recovered


def _keys_exist(runtime: Runtime, rows: list[dict[str, Any]]) -> list[bool]:
    """Whether each run's job-id key is still on the Redis that carries its queue."""
    namespace = runtime.settings.broker_namespace
    found: dict[int, bool] = {}
    by_queue: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_queue.setdefault(row["queue"], []).append(i)
    for client, queues in runtime.queue_servers.by_server(by_queue):
        pipe = client.pipeline(transaction=False)
        indexes = [i for q in queues for i in by_queue[q]]
        for i in indexes:
            pipe.exists(dedup_key(namespace, rows[i]["job_id"]))
        found.update(zip(indexes, (bool(n) for n in pipe.execute()), strict=True))
    return [found[i] for i in range(len(rows))]


def sentinel_key(namespace: str) -> str:
    return f"{namespace}:jobfleet:alive"


@dataclass(frozen=True)
class Recovery:
    redis_lost_data: bool
    redelivered: list[str]
    recovered: list[str]


def recover(runtime: Runtime, *, now: datetime, grace_s: int = 0) -> Recovery:
    """The scheduler's quick pass (every `RECOVERY_INTERVAL_S`): enqueue again what Redis lost.

    A sentinel key that nothing else writes tells, in one round trip, whether Redis lost its
    data since the last pass (a restart without persistence, a failover to an empty replica):
    then every QUEUED/FAILED run whose key is gone is enqueued again at once, rather than at
    the next full maintenance. RUNNING runs whose lease ran out are checked on every pass (a
    few rows: the runs in flight); they come back once their worker's lease ran out.
    """
    # One sentinel on each Redis server (REDIS_QUEUE_URLS): any of them may lose its data.
    key = sentinel_key(runtime.settings.broker_namespace)
    lost = any([bool(client.set(key, "1", nx=True)) for client in runtime.queue_servers.all()])
    # Every row from before the loss lost its message: no age floor (a send made since claims
    # its key first, so its row is never taken for a lost one).
    recovered = recover_lost(runtime, now=now, older_than_s=0) if lost else []
    redelivered = redeliver_stuck(runtime, now=now, grace_s=grace_s)
    if lost:
        log.warning(
            "maintenance.redis_data_lost", recovered=len(recovered), redelivered=len(redelivered)
        )
    return Recovery(lost, redelivered, recovered)


def _rebuild(row: dict[str, Any], *, attempt: int) -> Any:
    """The message of a run whose own was lost with Redis's data. Marked `recovered`: its
    start is written before it runs (never kept in Redis, `broker/starts.py`), since a start
    kept in the Redis that lost its data was lost with it."""
    spec = catalog.BY_NAME.get(row["job_name"])
    message = build_message(
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
    return message.copy(options={**message.options, "recovered": True})
