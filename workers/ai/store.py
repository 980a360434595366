"""The `ai_tasks` row of a job: created from the payload when the producer did not, claimed
under a lease, finished once with its result. Every statement is scoped by `org_id`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row

from workers.ai.contracts import AiRunV1

_COLUMNS = (
    "id, org_id, task, input, params, status, result, provider, model, calls, tokens_in, "
    "tokens_out, cost, error_code, attempts, deferrals, lease_until, finished_at"
)


@dataclass
class TaskRow:
    id: UUID
    org_id: UUID
    task: str
    input: Any
    params: dict[str, Any]
    status: str
    result: Any
    provider: str | None
    model: str | None
    calls: int
    tokens_in: int
    tokens_out: int
    cost: Decimal
    error_code: str | None
    attempts: int
    deferrals: int
    lease_until: datetime | None
    finished_at: datetime | None


def ensure(conn: psycopg.Connection[Any], payload: AiRunV1) -> TaskRow | None:
    """The task of `payload` in its org, inserted from the payload if the producer sent the job
    without creating the row (another domain, e.g. doc, sends `ai:run` without our tables)."""
    conn.execute(
        "INSERT INTO ai_tasks (id, org_id, task, input, params) VALUES (%s, %s, %s, %s, %s) "
        "ON CONFLICT (id) DO NOTHING",
        (
            payload.entity_id,
            payload.org_id,
            payload.task,
            json.dumps(payload.input),
            json.dumps(payload.params),
        ),
    )
    return get(conn, payload.entity_id, payload.org_id)


def get(conn: psycopg.Connection[Any], task_id: UUID, org_id: UUID) -> TaskRow | None:
    with conn.cursor(row_factory=class_row(TaskRow)) as cur:
        return cur.execute(
            f"SELECT {_COLUMNS} FROM ai_tasks WHERE id = %s AND org_id = %s", (task_id, org_id)
        ).fetchone()


def claim(
    conn: psycopg.Connection[Any], row: TaskRow, now: datetime, lease_s: float
) -> TaskRow | None:
    """RUNNING under a lease, unless done or held by a live lease (then None)."""
    with conn.cursor(row_factory=class_row(TaskRow)) as cur:
        return cur.execute(
            f"UPDATE ai_tasks SET status = 'RUNNING', attempts = attempts + 1, lease_until = %s, "
            f"started_at = COALESCE(started_at, %s), updated_at = %s "
            f"WHERE id = %s AND org_id = %s AND (status IN ('PENDING', 'FAILED') "
            f"OR (status = 'RUNNING' AND (lease_until IS NULL OR lease_until < %s))) "
            f"RETURNING {_COLUMNS}",
            (now + timedelta(seconds=lease_s), now, now, row.id, row.org_id, now),
        ).fetchone()


def succeed(
    conn: psycopg.Connection[Any], row: TaskRow, result: Any, provider: str, now: datetime
) -> None:
    conn.execute(
        "UPDATE ai_tasks SET status = 'SUCCEEDED', result = %s, provider = %s, error_code = NULL, "
        "error = NULL, lease_until = NULL, finished_at = %s, updated_at = %s "
        "WHERE id = %s AND org_id = %s",
        (json.dumps(result), provider, now, now, row.id, row.org_id),
    )


def release(
    conn: psycopg.Connection[Any],
    row: TaskRow,
    status: str,
    now: datetime,
    *,
    error_code: str | None,
    error: str | None,
    deferral: bool = False,
) -> None:
    """Back to PENDING (will run again) or FAILED (the job is dead), with the reason."""
    conn.execute(
        "UPDATE ai_tasks SET status = %s, error_code = %s, error = %s, lease_until = NULL, "
        "deferrals = deferrals + %s, finished_at = CASE WHEN %s = 'FAILED' THEN %s END, "
        "updated_at = %s WHERE id = %s AND org_id = %s AND status <> 'SUCCEEDED'",
        (status, error_code, error, int(deferral), status, now, now, row.id, row.org_id),
    )
