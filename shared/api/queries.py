"""The reads behind the job-status API: one org's jobs, keyset-paginated, and a job's state."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from ..jobs.runs import COLUMNS, RunView
from ..runtime import Runtime


class BadCursor(ValueError):
    """The pagination cursor is not one this API handed out."""


@dataclass(frozen=True)
class Filters:
    entity_type: str | None = None
    entity_id: str | None = None
    status: str | None = None
    job_name: str | None = None


def encode_cursor(queued_at: datetime, job_id: str) -> str:
    raw = json.dumps([queued_at.isoformat(), job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        queued_at, job_id = json.loads(raw)
        return datetime.fromisoformat(queued_at), str(job_id)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise BadCursor(f"invalid cursor {cursor!r}") from exc


def page(
    runtime: Runtime,
    *,
    org_id: UUID,
    filters: Filters,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[RunView], str | None]:
    """Newest first by (queued_at, job_id); the cursor is the last row's key, so a page costs an
    index range scan however deep it is (`ix_job_runs_org_status`, `ix_job_runs_console_entity`)."""
    where: list[str] = ["org_id = %s"]
    params: list[Any] = [org_id]
    for column, value in (
        ("entity_type", filters.entity_type),
        ("entity_id", filters.entity_id),
        ("status", filters.status),
        ("job_name", filters.job_name),
    ):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    if cursor is not None:
        where.append("(queued_at, job_id) < (%s, %s)")
        params.extend(decode_cursor(cursor))
    sql = (
        f"SELECT {COLUMNS} FROM job_runs WHERE {' AND '.join(where)} "
        "ORDER BY queued_at DESC, job_id DESC LIMIT %s"
    )
    runtime.settle()  # a job this process has just sent is listed
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql, [*params, limit + 1]).fetchall()
    runs = [RunView(**row) for row in rows[:limit]]
    more = len(rows) > limit
    next_cursor = (
        encode_cursor(runs[-1].queued_at, runs[-1].job_id) if more and runs[-1].queued_at else None
    )
    return runs, next_cursor


def state(runtime: Runtime, job_id: str, *, org_id: UUID) -> dict[str, Any] | None:
    """The few columns an event stream follows."""
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        row: dict[str, Any] | None = cur.execute(
            "SELECT job_id, status, attempt, progress, error_code, version FROM job_runs "
            "WHERE job_id = %s AND org_id = %s",
            (job_id, org_id),
        ).fetchone()
    return row
