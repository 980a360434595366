"""The `documents` and `document_pages` rows and every state change of the pipeline.

    UPLOADED -> PROCESSING (pages recorded, one doc:ocr each) -> FINALIZING (last page counted;
    doc:extract_structured + doc:index_search sent) -> READY (both done)
           \\-> FAILED (not a PDF, corrupt, encrypted, over a limit, or every page failed)

Fan-in: a page moves PENDING -> DONE/FAILED once, and the same statement adds it to
`documents.pages_done`; the statement that brings `pages_done` to `pages_total` is the last
page's. Functions take an open psycopg connection; the caller owns the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb


@dataclass(frozen=True)
class DocumentRow:
    id: UUID
    org_id: UUID
    file_object_id: UUID
    filename: str | None
    schema_name: str
    status: str
    pages_total: int | None
    pages_done: int
    pages_failed: int
    language: str | None
    error_code: str | None
    error: str | None
    extracted: Any
    extracted_at: datetime | None
    indexed_at: datetime | None
    created_at: datetime
    finished_at: datetime | None


COLUMNS = ", ".join(DocumentRow.__dataclass_fields__)


def get_document(
    conn: psycopg.Connection[Any], document_id: UUID, org_id: UUID, *, lock: bool = False
) -> DocumentRow | None:
    """The document, scoped by org (another org's id reads as missing)."""
    sql = f"SELECT {COLUMNS} FROM documents WHERE id = %s AND org_id = %s"
    with conn.cursor(row_factory=class_row(DocumentRow)) as cur:
        cur.execute(sql + (" FOR UPDATE" if lock else ""), (document_id, org_id))
        return cur.fetchone()


def ensure_document(
    conn: psycopg.Connection[Any], document_id: UUID, org_id: UUID, file_object_id: UUID
) -> DocumentRow | None:
    """The document row, locked; created when the producer sent doc:ingest without one."""
    conn.execute(
        "INSERT INTO documents (id, org_id, file_object_id) VALUES (%s, %s, %s) "
        "ON CONFLICT (id) DO NOTHING",
        (document_id, org_id, file_object_id),
    )
    return get_document(conn, document_id, org_id, lock=True)


def fail_document(conn: psycopg.Connection[Any], document_id: UUID, code: str, error: str) -> None:
    conn.execute(
        "UPDATE documents SET status = 'FAILED', error_code = %s, error = %s, "
        "updated_at = now(), finished_at = now() WHERE id = %s",
        (code, error[:2000], document_id),
    )


def record_pages(
    conn: psycopg.Connection[Any], document_id: UUID, org_id: UUID, pages: int
) -> None:
    """One PENDING row per page and `pages_total` (idempotent: a retried ingest adds nothing)."""
    conn.execute(
        "INSERT INTO document_pages (document_id, org_id, page) "
        "SELECT %s, %s, n FROM generate_series(1, %s) AS n ON CONFLICT DO NOTHING",
        (document_id, org_id, pages),
    )
    conn.execute(
        "UPDATE documents SET pages_total = %s, status = 'PROCESSING', error_code = NULL, "
        "error = NULL, updated_at = now() WHERE id = %s AND status IN ('UPLOADED', 'FAILED')",
        (pages, document_id),
    )


def page_status(
    conn: psycopg.Connection[Any], document_id: UUID, page: int, org_id: UUID
) -> str | None:
    row = conn.execute(
        "SELECT status FROM document_pages WHERE document_id = %s AND page = %s AND org_id = %s",
        (document_id, page, org_id),
    ).fetchone()
    return None if row is None else str(row[0])


def note_attempt(
    conn: psycopg.Connection[Any], document_id: UUID, page: int, attempt: int, error: str | None
) -> None:
    """A failed attempt that will be retried: the page stays PENDING (and uncounted)."""
    conn.execute(
        "UPDATE document_pages SET attempts = %s, error = %s "
        "WHERE document_id = %s AND page = %s AND status = 'PENDING'",
        (attempt, error, document_id, page),
    )


@dataclass(frozen=True)
class PageOutcome:
    status: str  # DONE | FAILED
    attempts: int
    method: str | None = None
    text: str | None = None
    confidence: float | None = None
    language: str | None = None
    error: str | None = None
    duration_ms: int | None = None


@dataclass(frozen=True)
class FanIn:
    counted: bool  # this call moved the page to DONE/FAILED
    pages_done: int
    pages_total: int
    pages_failed: int
    status: str

    @property
    def complete(self) -> bool:
        return self.pages_done >= self.pages_total


FINISH_PAGE = """
WITH page AS (
    UPDATE document_pages
    SET status = %(status)s, method = %(method)s, text = %(text)s, confidence = %(confidence)s,
        language = %(language)s, attempts = %(attempts)s, error = %(error)s,
        duration_ms = %(duration_ms)s, finished_at = now()
    WHERE document_id = %(doc)s AND page = %(page)s AND status = 'PENDING'
    RETURNING status
), counted AS (
    SELECT count(*)::int AS n, count(*) FILTER (WHERE status = 'FAILED')::int AS failed FROM page
)
UPDATE documents d
SET pages_done = d.pages_done + c.n,
    pages_failed = d.pages_failed + c.failed,
    status = CASE
        WHEN c.n = 0 OR d.pages_done + c.n < d.pages_total THEN d.status
        WHEN d.pages_failed + c.failed >= d.pages_total THEN 'FAILED'
        ELSE 'FINALIZING' END,
    error_code = CASE WHEN c.n > 0 AND d.pages_done + c.n >= d.pages_total
                       AND d.pages_failed + c.failed >= d.pages_total THEN 'ALL_PAGES_FAILED'
                      ELSE d.error_code END,
    finished_at = CASE WHEN c.n > 0 AND d.pages_done + c.n >= d.pages_total
                        AND d.pages_failed + c.failed >= d.pages_total THEN now()
                       ELSE d.finished_at END,
    updated_at = now()
FROM counted c
WHERE d.id = %(doc)s
RETURNING c.n > 0, d.pages_done, d.pages_total, d.pages_failed, d.status
"""


def finish_page(
    conn: psycopg.Connection[Any], document_id: UUID, page: int, outcome: PageOutcome
) -> FanIn:
    """Record the page's outcome and count it once (fan-in); see the module docstring."""
    params = {
        "doc": document_id,
        "page": page,
        "status": outcome.status,
        "method": outcome.method,
        "text": outcome.text,
        "confidence": outcome.confidence,
        "language": outcome.language,
        "attempts": outcome.attempts,
        "error": outcome.error,
        "duration_ms": outcome.duration_ms,
    }
    row = conn.execute(FINISH_PAGE, params).fetchone()
    if row is None:
        raise LookupError(f"document {document_id} vanished")
    return FanIn(bool(row[0]), int(row[1]), int(row[2] or 0), int(row[3]), str(row[4]))


def page_texts(conn: psycopg.Connection[Any], document_id: UUID) -> list[tuple[int, str, str]]:
    """(page, text, language) of the document's DONE pages, in page order."""
    rows = conn.execute(
        "SELECT page, coalesce(text, ''), coalesce(language, 'und') FROM document_pages "
        "WHERE document_id = %s AND status = 'DONE' ORDER BY page",
        (document_id,),
    ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]


#: READY once both final jobs have run, whichever finishes second (the row lock orders them).
_READY_WHEN_BOTH = """
    status = CASE WHEN status = 'FINALIZING' AND {other} IS NOT NULL THEN 'READY' ELSE status END,
    finished_at = CASE WHEN status = 'FINALIZING' AND {other} IS NOT NULL THEN now()
                       ELSE finished_at END,
    updated_at = now()
"""


def save_extraction(
    conn: psycopg.Connection[Any], document_id: UUID, extracted: dict[str, Any], language: str
) -> None:
    conn.execute(
        "UPDATE documents SET extracted = %s, language = %s, extracted_at = now(), "
        + _READY_WHEN_BOTH.format(other="indexed_at")
        + " WHERE id = %s",
        (Jsonb(extracted), language, document_id),
    )


def mark_indexed(conn: psycopg.Connection[Any], document_id: UUID) -> None:
    conn.execute(
        "UPDATE documents SET indexed_at = now(), "
        + _READY_WHEN_BOTH.format(other="extracted_at")
        + " WHERE id = %s",
        (document_id,),
    )
