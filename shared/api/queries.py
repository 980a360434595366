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


#: The run id above every other: a cursor's tie at its instant when its job id is not found.
LAST_ID = UUID(int=2**128 - 1)


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: its last run's `queued_at` and `id` (the keyset, newest first).

    A cursor handed out before migration 0021_run_index_ids (the job id was the tiebreaker)
    carries the job id instead of the id: see `after`."""

    queued_at: datetime
    id: UUID | None = None
    job_id: str | None = None


def encode_cursor(queued_at: datetime, run_id: UUID) -> str:
    raw = json.dumps({"at": queued_at.isoformat(), "id": str(run_id)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> Cursor:
    """The cursor's key: `{"at": ..., "id": ...}`, or the old form `[queued_at, job_id]`."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if isinstance(raw, dict):
            return Cursor(datetime.fromisoformat(raw["at"]), id=UUID(raw["id"]))
        queued_at, job_id = raw
        return Cursor(datetime.fromisoformat(queued_at), job_id=str(job_id))
    except (binascii.Error, ValueError, TypeError, KeyError) as exc:
        raise BadCursor(f"invalid cursor {cursor!r}") from exc


def after(cursor: Cursor) -> tuple[str, list[Any]]:
    """The condition (and its parameters) for the runs after `cursor`, newest first on
    `(queued_at, id)`: a range of the keyset indexes.

    An old cursor names its page's last run by job id: the page goes on after that run's id
    (its row found through the job id index). A run gone since (purged, deleted) or sent again
    (another `queued_at`) cannot place the cursor among the runs of its instant: they are all
    listed again (a run shown twice rather than one never shown)."""
    if cursor.id is not None:
        return "(queued_at, id) < (%s, %s)", [cursor.queued_at, cursor.id]
    return (
        "(queued_at, id) < (%s, COALESCE((SELECT r.id FROM job_runs AS r"
        " WHERE r.job_id = %s AND r.queued_at = %s LIMIT 1), %s))",
        [cursor.queued_at, cursor.job_id, cursor.queued_at, LAST_ID],
    )


def page(
    runtime: Runtime,
    *,
    org_id: UUID,
    filters: Filters,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[RunView], str | None]:
    """Newest first by (queued_at, id); the cursor is the last row's key, so a page costs an
    index range scan however deep it is (`ix_job_runs_console_org`, `ix_job_runs_org_status`,
    `ix_job_runs_console_entity`)."""
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
        condition, values = after(decode_cursor(cursor))
        where.append(condition)
        params.extend(values)
    sql = (
        f"SELECT id, {COLUMNS} FROM job_runs WHERE {' AND '.join(where)} "
        "ORDER BY queued_at DESC, id DESC LIMIT %s"
    )
    runtime.settle()  # a job this process has just sent is listed
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql, [*params, limit + 1]).fetchall()
    ids = [row.pop("id") for row in rows[:limit]]
    runs = [RunView(**row) for row in rows[:limit]]
    more = len(rows) > limit
    next_cursor = (
        encode_cursor(runs[-1].queued_at, ids[-1]) if more and runs[-1].queued_at else None
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
