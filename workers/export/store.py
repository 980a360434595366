"""The `exports` rows and their `file_objects`: every lookup is scoped by org.

    PENDING -> RUNNING -> COMPLETED
                  \\-> RETRYING (a transient failure; the next attempt restarts) -> RUNNING
                  \\-> FAILED (permanent, or the last attempt) | CANCELED (operator)

Functions take an open psycopg connection; the caller owns the transaction. The completion
(file_objects row + exports row) is one transaction with synchronous commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from shared.db.models import FileObject

FINISHED = ("COMPLETED", "FAILED", "CANCELED")


@dataclass(frozen=True)
class ExportRow:
    id: UUID
    org_id: UUID
    requested_by: UUID
    type: str
    params: dict[str, Any]
    status: str
    progress: dict[str, Any] | None
    row_count: int | None
    file_object_id: UUID | None
    error_code: str | None
    error: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def insert(
    conn: psycopg.Connection[Any],
    *,
    org_id: UUID,
    requested_by: UUID,
    type: str,
    params: dict[str, Any],
) -> UUID:
    row = conn.execute(
        "INSERT INTO exports (org_id, requested_by, type, params) VALUES (%s, %s, %s, %s) RETURNING id",
        (org_id, requested_by, type, Jsonb(params)),
    ).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def ensure(
    conn: psycopg.Connection[Any],
    *,
    export_id: UUID,
    org_id: UUID,
    requested_by: UUID,
    type: str,
    params: dict[str, Any],
) -> None:
    """The export's row, created from its job's payload when missing (an `export:build` sent by
    its catalog name, from any language: docs/producers.md). Idempotent: an existing row is
    left as it is (another org's row with that id stays invisible to this org's lookups)."""
    conn.execute(
        "INSERT INTO exports (id, org_id, requested_by, type, params) VALUES (%s, %s, %s, %s, %s) "
        "ON CONFLICT (id) DO NOTHING",
        (export_id, org_id, requested_by, type, Jsonb(params)),
    )


def get(conn: psycopg.Connection[Any], export_id: UUID, org_id: UUID) -> ExportRow | None:
    with conn.cursor(row_factory=class_row(ExportRow)) as cur:
        return cur.execute(
            "SELECT id, org_id, requested_by, type, params, status, progress, row_count, file_object_id, "
            "error_code, error, attempts, created_at, started_at, finished_at "
            "FROM exports WHERE id = %s AND org_id = %s",
            (export_id, org_id),
        ).fetchone()


def file_object(
    conn: psycopg.Connection[Any], file_object_id: UUID, org_id: UUID
) -> FileObject | None:
    with conn.cursor(row_factory=class_row(FileObject)) as cur:
        return cur.execute(
            "SELECT id, org_id, provider, bucket, key, content_type, size_bytes, sha256, created_at "
            "FROM file_objects WHERE id = %s AND org_id = %s",
            (file_object_id, org_id),
        ).fetchone()


def mark_running(conn: psycopg.Connection[Any], export_id: UUID, org_id: UUID) -> None:
    conn.execute(
        "UPDATE exports SET status = 'RUNNING', attempts = attempts + 1, started_at = now(), "
        "progress = NULL, error_code = NULL, error = NULL WHERE id = %s AND org_id = %s",
        (export_id, org_id),
    )


def set_progress(
    conn: psycopg.Connection[Any], export_id: UUID, org_id: UUID, done: int, total: int
) -> None:
    conn.execute(
        "UPDATE exports SET progress = %s WHERE id = %s AND org_id = %s",
        (Jsonb({"done": done, "total": total}), export_id, org_id),
    )


def finish(
    conn: psycopg.Connection[Any],
    export_id: UUID,
    org_id: UUID,
    *,
    status: str,
    code: str,
    error: str,
) -> None:
    """FAILED, CANCELED (finished) or RETRYING (another attempt follows)."""
    conn.execute(
        "UPDATE exports SET status = %s, error_code = %s, error = %s, "
        "finished_at = CASE WHEN %s IN ('FAILED', 'CANCELED') THEN now() END "
        "WHERE id = %s AND org_id = %s AND status <> 'COMPLETED'",
        (status, code, error[:2000], status, export_id, org_id),
    )


def complete(
    conn: psycopg.Connection[Any], export_id: UUID, org_id: UUID, stored: FileObject, rows: int
) -> UUID:
    """Record the artefact (its `file_objects` row, under `stored.id`) and complete the export,
    in one durable transaction."""
    stored.org_id = org_id
    with conn.transaction():
        conn.execute("SET LOCAL synchronous_commit TO on")
        # A retry after a crash between the upload and this commit rewrote the same key.
        conn.execute(
            "DELETE FROM file_objects f WHERE org_id = %s AND provider = %s AND bucket = %s AND key = %s "
            "AND NOT EXISTS (SELECT 1 FROM exports e WHERE e.file_object_id = f.id)",
            (org_id, stored.provider, stored.bucket, stored.key),
        )
        row = conn.execute(
            "INSERT INTO file_objects (id, org_id, provider, bucket, key, content_type, size_bytes, sha256) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                stored.id,
                org_id,
                stored.provider,
                stored.bucket,
                stored.key,
                stored.content_type,
                stored.size_bytes,
                stored.sha256,
            ),
        ).fetchone()
        assert row is not None
        file_object_id = UUID(str(row[0]))
        conn.execute(
            "UPDATE exports SET status = 'COMPLETED', file_object_id = %s, row_count = %s, "
            "progress = %s, finished_at = now(), error_code = NULL, error = NULL "
            "WHERE id = %s AND org_id = %s",
            (file_object_id, rows, Jsonb({"done": rows, "total": rows}), export_id, org_id),
        )
    return file_object_id
