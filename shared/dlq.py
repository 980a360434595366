"""The dead-letter queue: DEAD runs in `job_runs`, listed, inspected, replayed and purged.

Redis's own dead-letter set keeps only the message (no error, no attempt count) and prunes it
after 7 days, so the fleet's DLQ is `job_runs` (DESIGN §3). A replay keeps the job id, resets
the attempt count, records who replayed it and when, and enqueues the stored payload again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import redis
from psycopg.rows import dict_row

from .errors import BrokerUnavailable, InvalidState, RunNotFound
from .jobs import catalog
from .jobs.message import build_message
from .jobs.runs import RunView, list_runs
from .runtime import Runtime, get_runtime


def list_dead(
    *,
    queue: str | None = None,
    job_name: str | None = None,
    org_id: UUID | None = None,
    limit: int = 100,
    runtime: Runtime | None = None,
) -> list[RunView]:
    return list_runs(
        status="DEAD", queue=queue, job_name=job_name, org_id=org_id, limit=limit, runtime=runtime
    )


@dataclass(frozen=True)
class Replay:
    job_id: str
    message_id: str | None
    dry_run: bool


#: The states a run can be replayed from: it ended without success and nothing of it is left
#: in the broker (a CANCELED run too: the console's retry, issue 32).
REPLAYABLE = ("DEAD", "CANCELED")


def replay(
    job_id: str,
    *,
    org_id: UUID | None,
    by: str,
    dry_run: bool = False,
    runtime: Runtime | None = None,
    states: Sequence[str] = ("DEAD",),
) -> Replay:
    """Replay the DEAD run of `job_id` in org `org_id` (a run of another org is "no run",
    exactly like a missing one). `org_id=None` is the operator's unscoped action: a required
    keyword, so that no caller replays across tenants by forgetting it. `states`: the states
    replayed (at most `REPLAYABLE`; the CLI and the API replay DEAD runs only)."""
    if not set(states) <= set(REPLAYABLE):
        raise ValueError(f"only {', '.join(REPLAYABLE)} runs can be replayed, not {states}")
    runtime = runtime or get_runtime()
    scope, params = ("AND org_id = %s", [org_id]) if org_id is not None else ("", [])
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute("SET LOCAL synchronous_commit TO on")
        row = cur.execute(
            "SELECT job_id, org_id, job_name, queue, status, entity_type, entity_id, payload, request_id, "
            f"error_code, error, attempt FROM job_runs WHERE job_id = %s {scope} FOR UPDATE",
            [job_id, *params],
        ).fetchone()
        if row is None:
            raise RunNotFound(f"no run {job_id}" + (f" for org {org_id}" if org_id else ""))
        if row["status"] not in states:
            raise InvalidState(
                f"{job_id} is {row['status']}; only {' or '.join(states)} runs are replayed"
            )
        if dry_run:
            return Replay(job_id, None, dry_run=True)
        spec = catalog.BY_NAME.get(row["job_name"])
        message = build_message(
            job_name=row["job_name"],
            queue=spec.queue if spec else row["queue"],
            payload=row["payload"],
            job_id=job_id,
            org_id=row["org_id"],
            entity_type=row["entity_type"],
            entity_id=row["entity_id"],
            request_id=row["request_id"],
        )
        cur.execute(
            "INSERT INTO job_replays (job_id, replayed_by, previous_error_code, previous_error, previous_attempt) "
            "VALUES (%s, %s, %s, %s, %s)",
            (job_id, by, row["error_code"], row["error"], row["attempt"]),
        )
        cur.execute(
            "UPDATE job_runs SET status = 'QUEUED', attempt = 0, message_id = %s, replayed_at = now(), "
            "replayed_by = %s, replay_count = replay_count + 1, finished_at = NULL, next_retry_at = NULL, "
            "error_code = NULL, error = NULL, result = NULL, "
            "cancel_requested = FALSE WHERE job_id = %s",
            (message.message_id, by, job_id),
        )
        try:
            runtime.broker_for(message.queue_name).enqueue(message)
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"cannot enqueue the replay of {job_id}: {exc}") from exc
    return Replay(job_id, message.message_id, dry_run=False)


def replay_all(
    *,
    queue: str,
    org_id: UUID | None,
    by: str,
    dry_run: bool = False,
    limit: int = 1000,
    runtime: Runtime | None = None,
) -> list[Replay]:
    """Replay the dead runs of `queue` in org `org_id` (None: every org, operators)."""
    runtime = runtime or get_runtime()
    return [
        replay(run.job_id, org_id=org_id, by=by, dry_run=dry_run, runtime=runtime)
        for run in list_dead(queue=queue, org_id=org_id, limit=limit, runtime=runtime)
    ]


def history(
    job_id: str, *, org_id: UUID | None, runtime: Runtime | None = None
) -> list[dict[str, Any]]:
    """The replays of `job_id` in org `org_id` (None: any org, operators)."""
    runtime = runtime or get_runtime()
    scope, params = ("AND r.org_id = %s", [org_id]) if org_id is not None else ("", [])
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT a.* FROM job_replays a JOIN job_runs r ON r.job_id = a.job_id"
            f" WHERE a.job_id = %s {scope} ORDER BY a.replayed_at",
            [job_id, *params],
        ).fetchall()


def purge(*, older_than: datetime, queue: str | None = None, runtime: Runtime | None = None) -> int:
    """Delete DEAD runs that died before `older_than` and release their job ids (so they can
    be sent again); returns how many."""
    runtime = runtime or get_runtime()
    sql = "DELETE FROM job_runs WHERE status = 'DEAD' AND finished_at < %s"
    params: list[Any] = [older_than]
    if queue:
        sql += " AND queue = %s"
        params.append(queue)
    with runtime.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        job_ids = [row[0] for row in conn.execute(sql + " RETURNING job_id", params).fetchall()]
    runtime.sender.gate.forget(job_ids)
    return len(job_ids)
