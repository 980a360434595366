"""`doc:ocr`: the text of one page, from its text layer or by OCR, and the fan-in.

A page with a text layer (at least `DOC_TEXT_MIN_CHARS` characters) is extracted as is
(confidence 1.0); a scanned page is rendered and read by Tesseract. A failed attempt leaves the
page PENDING and the job is retried alone; the last attempt (or a permanent error) records the
page FAILED. Either way the page is counted once, and the call that counts the last page sends
`doc:extract_structured` and `doc:index_search`. A crash between that commit and the sends is
covered: a redelivered page finds itself already counted, sees the document complete and sends
again, and the stable job ids turn the second send into a duplicate (one run each).
"""

from __future__ import annotations

import time
from typing import Any

from shared.errors import PermanentError
from shared.jobs import catalog
from shared.jobs.context import JobContext
from workers.doc.contracts import DocExtractStructuredV1, DocIndexSearchV1, DocOcrV1

from . import language, pdf, store
from .source import load_file_row
from .wiring import DocServices


def extract_page(data: bytes, page: int, services: DocServices) -> store.PageOutcome:
    """Text of `page`: its text layer when it has one, else OCR of its rendering."""
    settings = services.settings
    started = time.monotonic()
    text = pdf.page_text(data, page)
    if len(text) >= settings.text_min_chars:
        method, confidence = "text-layer", 1.0
    else:
        image = pdf.render_png(data, page, settings.ocr_dpi)
        result = services.recognize(image)
        method, text, confidence = "ocr", pdf.normalize(result.text), result.confidence
    return store.PageOutcome(
        status="DONE",
        attempts=0,
        method=method,
        text=text,
        confidence=confidence,
        language=language.detect(text),
        duration_ms=round((time.monotonic() - started) * 1000),
    )


def process_page(payload: DocOcrV1, job: JobContext, services: DocServices) -> dict[str, Any]:
    doc_id, page = payload.entity_id, payload.page
    with services.pool.connection() as conn:
        doc = store.get_document(conn, doc_id, payload.org_id)
        status = store.page_status(conn, doc_id, page, payload.org_id)
        if doc is None or status is None:
            raise PermanentError(f"page {page} of document {doc_id} not found", code="NOT_FOUND")
        file_row = load_file_row(conn, doc.file_object_id, payload.org_id)
        conn.commit()
    if status != "PENDING":  # counted by an earlier delivery; make sure the trigger went out
        fan_in = store.FanIn(
            False, doc.pages_done, doc.pages_total or 0, doc.pages_failed, doc.status
        )
        trigger_final_jobs(payload, fan_in, doc.schema_name, services)
        return {"page": page, "status": status, "already": True}
    try:
        if file_row is None:
            raise PermanentError(f"file of document {doc_id} not found", code="FILE_NOT_FOUND")
        data = services.files.get(services.storage, file_row)
        outcome = extract_page(data, page, services)
    except Exception as exc:
        last = isinstance(exc, PermanentError) or job.attempt >= job.max_attempts
        error = f"{getattr(exc, 'code', type(exc).__name__)}: {exc}"
        with services.pool.connection() as conn:
            conn.execute("SET LOCAL synchronous_commit TO on")
            if last:
                failed = store.PageOutcome(status="FAILED", attempts=job.attempt, error=error)
                fan_in = store.finish_page(conn, doc_id, page, failed)
            else:
                store.note_attempt(conn, doc_id, page, job.attempt, error)
        if last:
            trigger_final_jobs(payload, fan_in, doc.schema_name, services)
        raise
    outcome = store.PageOutcome(**{**outcome.__dict__, "attempts": job.attempt})
    with services.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        fan_in = store.finish_page(conn, doc_id, page, outcome)
    trigger_final_jobs(payload, fan_in, doc.schema_name, services)
    return {
        "page": page,
        "method": outcome.method,
        "confidence": outcome.confidence,
        "chars": len(outcome.text or ""),
        "language": outcome.language,
        "document": {"pages_done": fan_in.pages_done, "pages_total": fan_in.pages_total},
    }


def trigger_final_jobs(
    payload: DocOcrV1, fan_in: store.FanIn, schema_name: str, services: DocServices
) -> bool:
    """Send the two final jobs when every page is counted and one at least succeeded."""
    if not fan_in.complete or fan_in.status == "FAILED":
        return False
    if fan_in.status not in ("FINALIZING", "READY"):
        return False
    org, doc = payload.org_id, payload.entity_id
    services.send_job(
        catalog.DOC_EXTRACT_STRUCTURED,
        DocExtractStructuredV1.model_validate(
            {"org_id": org, "entity_id": doc, "schema": schema_name}
        ),
    )
    services.send_job(catalog.DOC_INDEX_SEARCH, DocIndexSearchV1(org_id=org, entity_id=doc))
    return True
