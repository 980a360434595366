"""Fan-out and fan-in: one doc:ocr per page, a failing page retried alone, each page counted
once, and the final jobs sent exactly once, by the last page."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from shared.config import RetryPolicy
from shared.jobs import runs
from workers.doc import store
from workers.doc.ocr import OcrResult, Tesseract
from workers.doc.status import ingest_job_id

from .conftest import DocWorker, document, pages, runs_of, settled_runs, wait_document
from .pdfs import text_pdf

SCAN_TEXT = "Devis n° D-77\nTotal TTC : 10,00 EUR"
DOC_ONE_ATTEMPT = RetryPolicy(max_attempts=1, min_backoff_ms=0)


@pytest.fixture(scope="module")
def three_hundred_pages() -> bytes:
    return text_pdf([f"Page {i}: rapport annuel, chapitre {i}." for i in range(1, 301)])


def test_three_hundred_page_document_fans_in_once(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID, three_hundred_pages: bytes
) -> None:
    up = doc_worker.upload(three_hundred_pages, org=org)
    started = time.monotonic()
    doc_worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "READY", "FAILED", timeout=90)
    elapsed = time.monotonic() - started

    assert (doc["status"], doc["pages_done"], doc["pages_total"], doc["pages_failed"]) == (
        "READY",
        300,
        300,
        0,
    )
    ocr_runs = settled_runs(db, "doc:ocr", up.document_id, 300)
    assert {r["status"] for r in ocr_runs} == {"COMPLETED"}
    settled_runs(db, "doc:extract_structured", up.document_id, 1)
    settled_runs(db, "doc:index_search", up.document_id, 1)
    settled_runs(db, "doc:ingest", up.document_id, 1)
    run = runs.find(ingest_job_id(org, up.document_id, up.file_object_id), org_id=org)
    assert run is not None and run.progress == {"done": 300, "total": 300}
    assert all(p["method"] == "text-layer" for p in pages(db, up.document_id))
    print(f"300 text pages end to end in {elapsed:.1f}s")


class FlakyOcr:
    """Fails the first `failures` calls, then reads every image as `SCAN_TEXT`."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, image: bytes) -> OcrResult:
        with self.lock:
            self.calls += 1
            if self.calls <= self.failures:
                raise RuntimeError(f"simulated OCR crash #{self.calls}")
        assert image.startswith(b"\x89PNG")
        return OcrResult(text=SCAN_TEXT, confidence=0.9, words=7)


def test_a_page_failing_ocr_is_retried_alone(
    make_doc_worker: Callable[..., DocWorker], db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    ocr = FlakyOcr(failures=1)
    worker = make_doc_worker(recognize=ocr)
    # Page 2 has no text layer: it goes to the (flaky) OCR; pages 1 and 3 do not.
    up = worker.upload(
        text_pdf(["Première page du devis.", "", "Troisième page du devis."]), org=org
    )
    worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "READY", "FAILED")

    assert (doc["status"], doc["pages_done"], doc["pages_failed"]) == ("READY", 3, 0)
    by_page = {r["payload"]["page"]: r for r in settled_runs(db, "doc:ocr", up.document_id, 3)}
    assert {p: (r["status"], r["attempt"]) for p, r in by_page.items()} == {
        1: ("COMPLETED", 1),
        2: ("COMPLETED", 2),
        3: ("COMPLETED", 1),
    }
    [ingest_run] = settled_runs(db, "doc:ingest", up.document_id, 1)
    assert (ingest_run["status"], ingest_run["attempt"]) == ("COMPLETED", 1)
    page2 = pages(db, up.document_id)[1]
    assert (page2["method"], page2["attempts"], page2["text"]) == ("ocr", 2, SCAN_TEXT)
    assert ocr.calls == 2
    settled_runs(db, "doc:extract_structured", up.document_id, 1)


def test_a_page_failing_every_attempt_is_recorded_and_the_document_still_finishes(
    make_doc_worker: Callable[..., DocWorker], db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    worker = make_doc_worker(recognize=FlakyOcr(failures=1_000))
    up = worker.upload(text_pdf(["Invoice page one, total 10.00 EUR.", ""]), org=org)
    worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "READY", "FAILED", timeout=30)

    assert (doc["status"], doc["pages_done"], doc["pages_failed"]) == ("READY", 2, 1)
    failed = pages(db, up.document_id)[1]
    assert failed["status"] == "FAILED" and failed["attempts"] == 3
    assert "simulated OCR crash" in failed["error"]
    page_runs = {r["payload"]["page"]: r for r in settled_runs(db, "doc:ocr", up.document_id, 2)}
    assert (page_runs[2]["status"], page_runs[2]["attempt"]) == ("DEAD", 3)
    assert page_runs[1]["attempt"] == 1


def test_missing_tesseract_is_a_clear_error_not_an_empty_text(
    make_doc_worker: Callable[..., DocWorker], db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    missing = Tesseract(cmd="tesseract-not-installed")
    worker = make_doc_worker({"retries": {"doc": DOC_ONE_ATTEMPT}}, recognize=missing.recognize)
    up = worker.upload(text_pdf([""]), org=org)
    worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "FAILED", "READY")

    assert doc["error_code"] == "ALL_PAGES_FAILED"
    [page] = pages(db, up.document_id)
    assert page["status"] == "FAILED" and page["text"] is None
    assert (
        "OCR_UNAVAILABLE" in page["error"] and "apt-get install -y tesseract-ocr" in page["error"]
    )
    [run] = settled_runs(db, "doc:ocr", up.document_id, 1)
    assert run["status"] == "DEAD" and run["error_code"] == "OCR_UNAVAILABLE"
    assert runs_of(db, "doc:extract_structured", up.document_id) == []


def test_each_page_is_counted_once_and_one_call_completes_the_document(
    runtime: Any, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    """40 pages finished twice each from 8 threads (redeliveries racing the first delivery)."""
    file_id, doc_id, n = uuid.uuid4(), uuid.uuid4(), 40
    db.execute(
        "INSERT INTO file_objects (id, org_id, provider, bucket, key, content_type, size_bytes, sha256) "
        "VALUES (%s, %s, 'LOCAL', 'b', 'k', 'application/pdf', 1, 'x')",
        (file_id, org),
    )
    db.execute(
        "INSERT INTO documents (id, org_id, file_object_id) VALUES (%s, %s, %s)",
        (doc_id, org, file_id),
    )
    with psycopg.connect(runtime.settings.database_dsn) as conn:
        store.record_pages(conn, doc_id, org, n)
    results: list[store.FanIn] = []
    lock = threading.Lock()
    work = [p for p in range(1, n + 1) for _ in range(2)]

    def finish_all(share: list[int]) -> None:
        with psycopg.connect(runtime.settings.database_dsn) as conn:
            for page in share:
                outcome = store.PageOutcome(
                    status="DONE", attempts=1, text=f"p{page}", language="fr"
                )
                fan_in = store.finish_page(conn, doc_id, page, outcome)
                conn.commit()
                with lock:
                    results.append(fan_in)

    threads = [threading.Thread(target=finish_all, args=(work[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    counted = [r for r in results if r.counted]
    assert len(results) == 2 * n and len(counted) == n
    assert [r.pages_done for r in counted if r.complete] == [n]
    assert db.execute(
        "SELECT pages_done, status FROM documents WHERE id = %s", (doc_id,)
    ).fetchone() == (n, "FINALIZING")


def test_a_redelivered_page_after_completion_sends_the_final_jobs_only_as_duplicates(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    """The crash window: the last page's count committed, its sends lost. A redelivery finds
    the page counted, sends again, and the stable job ids keep one run of each final job."""
    from shared.jobs.context import JobContext
    from workers.doc.contracts import DocOcrV1
    from workers.doc.pages import process_page

    up = doc_worker.upload(text_pdf(["Seule page de la facture."]), org=org)
    doc_worker.ingest(up, org)
    wait_document(db, up.document_id, "READY", "FAILED")
    sent: list[Any] = []
    real_send = doc_worker.services.send_job

    def recording_send(spec: Any, payload: Any) -> Any:
        result = real_send(spec, payload)
        sent.append((spec.name, result.duplicate))
        return result

    services = replace(doc_worker.services, send_job=recording_send)
    payload = DocOcrV1(org_id=org, entity_id=up.document_id, page=1)
    job = JobContext(
        "redelivered", "doc:ocr", "doc", org, attempt=2, max_attempts=3, message_id="m"
    )

    result = process_page(payload, job, services)

    assert result["already"] is True
    assert sent == [("doc:extract_structured", True), ("doc:index_search", True)]
    assert len(settled_runs(db, "doc:extract_structured", up.document_id, 1)) == 1
    assert document(db, up.document_id)["pages_done"] == 1
