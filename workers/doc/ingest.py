"""`doc:ingest`: check the uploaded file, record its pages, fan out one `doc:ocr` per page.

Limits (size, pages) and integrity (not a PDF, corrupt, encrypted, checksum) are permanent
failures: the document turns FAILED with the reason and the run is DEAD with the same code.
A retried ingest records nothing twice and re-sends the page jobs, whose stable ids make every
already-sent page a duplicate; the checkpoint skips the pages a previous attempt sent.
"""

from __future__ import annotations

from typing import Any

from shared.errors import PermanentError
from shared.jobs import catalog
from shared.jobs.context import JobContext
from workers.doc.contracts import DocIngestV1, DocOcrV1

from . import pdf, store
from .source import load_file_row
from .wiring import DocServices

#: Progress (and checkpoint) is written about this many times per fan-out.
PROGRESS_STEPS = 20


def ingest(payload: DocIngestV1, job: JobContext, services: DocServices) -> dict[str, Any]:
    settings = services.settings
    with services.pool.connection() as conn:
        file_row = load_file_row(conn, payload.file_object_id, payload.org_id)
        if file_row is None:
            raise PermanentError(
                f"file object {payload.file_object_id} not found in org {payload.org_id}",
                code="FILE_NOT_FOUND",
            )
        doc = store.ensure_document(conn, payload.entity_id, payload.org_id, file_row.id)
        if doc is None:
            raise PermanentError(f"document {payload.entity_id} not found", code="NOT_FOUND")
        if doc.file_object_id != file_row.id:
            raise PermanentError(
                f"document {doc.id} belongs to file {doc.file_object_id}, not {file_row.id}",
                code="FILE_MISMATCH",
            )
        conn.commit()
        if doc.status in ("FINALIZING", "READY"):
            return {"document_id": str(doc.id), "pages": doc.pages_total, "status": doc.status}
        try:
            if file_row.size_bytes > settings.max_bytes:
                raise pdf.BadDocument(
                    f"the file is {file_row.size_bytes} bytes, over the limit of "
                    f"{settings.max_bytes}",
                    code="TOO_LARGE",
                )
            data = services.files.get(services.storage, file_row)
            info = pdf.inspect(data)
            if info.pages > settings.max_pages:
                raise pdf.BadDocument(
                    f"the PDF has {info.pages} pages, over the limit of {settings.max_pages}",
                    code="TOO_MANY_PAGES",
                )
        except PermanentError as exc:
            store.fail_document(conn, doc.id, exc.code, str(exc))
            conn.commit()
            raise
        conn.execute("SET LOCAL synchronous_commit TO on")
        store.record_pages(conn, doc.id, doc.org_id, info.pages)
        conn.commit()
    sent, duplicates = fan_out(payload, job, services, info.pages)
    return {
        "document_id": str(payload.entity_id),
        "pages": info.pages,
        "sent": sent,
        "duplicates": duplicates,
    }


def fan_out(
    payload: DocIngestV1, job: JobContext, services: DocServices, pages: int
) -> tuple[int, int]:
    """Send `doc:ocr` for every page from the checkpoint on; returns (sent, duplicates)."""
    checkpoint = job.checkpoint if isinstance(job.checkpoint, dict) else {}
    start = int(checkpoint.get("next_page", 1))
    step = max(1, pages // PROGRESS_STEPS)
    sent = duplicates = 0
    job.progress(start - 1, pages)
    for page in range(start, pages + 1):
        result = services.send_job(
            catalog.DOC_OCR,
            DocOcrV1(org_id=payload.org_id, entity_id=payload.entity_id, page=page),
        )
        if result.duplicate:
            duplicates += 1
        else:
            sent += 1
        if page % step == 0 or page == pages:
            job.progress(page, pages, checkpoint={"next_page": page + 1})
    return sent, duplicates
