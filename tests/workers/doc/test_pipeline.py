"""Born-digital and scanned documents through the whole pipeline on a real worker:
ingest -> one doc:ocr per page -> extract_structured + index_search -> READY."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from shared.jobs import runs
from tests.support.wait import wait_for
from workers.doc.status import document_status, ingest_job_id

from .conftest import DocWorker, pages, settled_runs, wait_document
from .pdfs import CONDITIONS_FR, INVOICE_EN, INVOICE_FR, SCAN_FR, scanned_pdf, text_pdf


def fields(doc: dict[str, Any]) -> dict[str, Any]:
    return {name: f["value"] for name, f in doc["extracted"]["fields"].items()}


def test_french_invoice_is_split_extracted_and_ready(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    up = doc_worker.upload(text_pdf([INVOICE_FR, CONDITIONS_FR]), org=org, filename="facture.pdf")
    doc_worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "READY", "FAILED")

    assert doc["status"] == "READY" and (doc["pages_done"], doc["pages_total"]) == (2, 2)
    assert doc["language"] == "fr"
    assert [
        (p["status"], p["method"], p["confidence"], p["language"])
        for p in pages(db, up.document_id)
    ] == [
        ("DONE", "text-layer", 1.0, "fr"),
        ("DONE", "text-layer", 1.0, "fr"),
    ]
    assert doc["extracted"]["schema"] == "invoice"
    assert fields(doc) | {"supplier": None} == {
        "number": "FAC-2024-0042",
        "issue_date": "2024-03-12",
        "due_date": "2024-04-11",
        "total_net": "1200.00",
        "vat_amount": "240.00",
        "vat_rate": "20.00",
        "total_gross": "1440.00",
        "currency": "EUR",
        "iban": "FR7630006000011234567890189",
        "vat_number": "FR40303265045",
        "supplier": None,
    }
    assert doc["extracted"]["fields"]["supplier"]["value"] == "ACME Conseil SARL"
    assert doc["extracted"]["fields"]["total_gross"]["confidence"] >= 0.95
    # Each final job ran exactly once; the ingest run shows the fan-out progress.
    for job_name in ("doc:ingest", "doc:extract_structured", "doc:index_search"):
        [run_row] = settled_runs(db, job_name, up.document_id, 1)
        assert (run_row["status"], run_row["attempt"]) == ("COMPLETED", 1)
    run = runs.find(ingest_job_id(org, up.document_id, up.file_object_id), org_id=org)
    assert run is not None
    assert run.progress == {"done": 2, "total": 2}
    status = document_status(doc_worker.services.pool, up.document_id, org)
    assert status is not None and status["pages_by_method"] == {"text-layer": 2}


def test_english_invoice_is_extracted_in_english(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    up = doc_worker.upload(
        text_pdf([INVOICE_EN]), org=org, filename="invoice.pdf", schema="invoice"
    )
    doc_worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "READY", "FAILED")

    assert doc["language"] == "en"
    assert fields(doc) | {"supplier": None} == {
        "number": "INV-7731",
        "issue_date": "2024-03-05",
        "due_date": "2024-04-04",
        "total_net": "2500.00",
        "vat_amount": "500.00",
        "vat_rate": "20.00",
        "total_gross": "3000.00",
        "currency": "USD",
        "iban": "GB82WEST12345698765432",
        "vat_number": "GB123456789",
        "supplier": None,
    }
    assert doc["extracted"]["fields"]["supplier"]["value"] == "Northwind Trading Ltd"


def test_scanned_page_is_read_by_tesseract(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    up = doc_worker.upload(scanned_pdf(SCAN_FR), org=org, filename="scan.pdf")
    doc_worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "READY", "FAILED", timeout=60)

    [page] = pages(db, up.document_id)
    assert page["method"] == "ocr" and page["status"] == "DONE"
    assert 0.6 < page["confidence"] <= 1.0
    assert "SCAN-2024-7" in page["text"]
    assert fields(doc)["number"] == "SCAN-2024-7"
    assert fields(doc)["total_gross"] == "360.00"


def test_ai_extractor_is_requested_through_ai_run_when_configured(
    make_doc_worker: Callable[..., DocWorker], db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    worker = make_doc_worker(doc={"ai_extract": True})
    up = worker.upload(text_pdf([INVOICE_EN]), org=org, schema="invoice")
    worker.ingest(up, org)

    doc = wait_document(db, up.document_id, "READY", "FAILED")

    ai = doc["extracted"]["ai"]
    # The QUEUED row of a send is group-committed just after the enqueue: wait for it.
    run = wait_for(lambda: runs.find(ai["job_id"], org_id=org), timeout=10, what="ai:run row")
    assert run.job_name == "ai:run" and run.queue == "ai"
    assert run.entity_id == ai["ai_task_id"]
    assert run.payload["task"] == "extract" and "INV-7731" in run.payload["input"]
    params = run.payload["params"]
    assert params["schema_name"] == "invoice" and params["document_id"] == str(up.document_id)
    # A JSON Schema the ai worker accepts for `extract` (it refuses anything else: INVALID_PARAMS).
    from jsonschema import validators

    validators.validator_for(params["schema"]).check_schema(params["schema"])
    assert {"number", "issue_date", "due_date", "total_gross", "iban"} <= set(
        params["schema"]["properties"]
    )
    # The rule-based result is there all the same.
    assert doc["extracted"]["fields"]["number"]["value"] == "INV-7731"
