"""Files doc:ingest refuses: a permanent failure with the reason, on the run and the document,
and no page job sent."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from shared.errors import PayloadError
from shared.jobs import runs
from tests.support.wait import wait_for, wait_run
from workers.doc.status import ingest_job_id

from .conftest import DocWorker, runs_of, wait_document
from .pdfs import NOT_A_PDF, corrupt_pdf, encrypted_pdf, text_pdf

CASES: dict[str, tuple[Callable[[], bytes], dict[str, Any], str]] = {
    "corrupt": (corrupt_pdf, {}, "corrupt"),
    "encrypted": (encrypted_pdf, {}, "encrypted"),
    "not-a-pdf": (lambda: NOT_A_PDF, {}, "not a PDF"),
    "over-page-limit": (
        lambda: text_pdf(["page"] * 6),
        {"max_pages": 5},
        "6 pages, over the limit of 5",
    ),
    "over-size-limit": (
        lambda: text_pdf(["big page " * 400]),
        {"max_bytes": 1_000},
        "over the limit of 1000",
    ),
}
CODES = {
    "corrupt": "CORRUPT",
    "encrypted": "ENCRYPTED",
    "not-a-pdf": "NOT_A_PDF",
    "over-page-limit": "TOO_MANY_PAGES",
    "over-size-limit": "TOO_LARGE",
}


@pytest.mark.parametrize("case", list(CASES))
def test_rejected_file_fails_the_document_at_once_with_the_reason(
    case: str,
    make_doc_worker: Callable[..., DocWorker],
    db: psycopg.Connection[Any],
    org: uuid.UUID,
) -> None:
    make_data, limits, reason = CASES[case]
    worker = make_doc_worker(doc=limits)
    up = worker.upload(make_data(), org=org)
    worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "FAILED", "READY")

    assert (doc["status"], doc["error_code"]) == ("FAILED", CODES[case])
    assert reason in doc["error"]
    # The document is FAILED in the handler's transaction; the run's outcome follows it.
    run = wait_run(ingest_job_id(org, up.document_id, up.file_object_id), "DEAD", org_id=org)
    assert (run.status, run.error_code, run.attempt) == ("DEAD", CODES[case], 1)
    assert reason in (run.error or "")
    assert runs_of(db, "doc:ocr", up.document_id) == []


def test_ingest_of_another_orgs_file_is_refused(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    up = doc_worker.upload(text_pdf(["hello"]), org=org)
    intruder = uuid.uuid4()
    with pytest.raises(PayloadError, match="no documents row"):  # a Python send: refused at once
        doc_worker.ingest(up, intruder)
    doc_worker.ingest(up, intruder, unchecked=True)  # a foreign producer's: the worker refuses

    def dead() -> Any:
        run = runs.find(ingest_job_id(intruder, up.document_id, up.file_object_id), org_id=intruder)
        return run if run is not None and run.status == "DEAD" else None

    run = wait_for(dead, timeout=15, what="intruder ingest DEAD")
    assert run.error_code == "FILE_NOT_FOUND"
    assert db.execute(
        "SELECT status FROM documents WHERE id = %s", (up.document_id,)
    ).fetchone() == ("UPLOADED",)
