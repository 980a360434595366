"""`fleet doc search`: language-aware full-text search over the indexed pages, ranked, with
snippets, scoped by org."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
from typer.testing import CliRunner

from workers.doc.cli import app
from workers.doc.search import search

from .conftest import DocWorker, wait_document
from .pdfs import CONDITIONS_FR, INVOICE_EN, INVOICE_FR, text_pdf


def ingest_ready(
    worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID, pdf: bytes, name: str
) -> uuid.UUID:
    up = worker.upload(pdf, org=org, filename=name)
    worker.ingest(up, org)
    assert wait_document(db, up.document_id, "READY", "FAILED")["status"] == "READY"
    return up.document_id


def test_search_is_language_aware_ranked_and_scoped_by_org(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    fr = ingest_ready(doc_worker, db, org, text_pdf([INVOICE_FR, CONDITIONS_FR]), "facture.pdf")
    en = ingest_ready(doc_worker, db, org, text_pdf([INVOICE_EN]), "invoice.pdf")
    other_org = uuid.uuid4()
    ingest_ready(doc_worker, db, other_org, text_pdf([CONDITIONS_FR]), "autre.pdf")

    with doc_worker.services.pool.connection() as conn:
        # French stemming: "pénalité" finds "pénalités" on page 2 of the French document only.
        [hit] = search(conn, org, "pénalité")
        assert (hit.document_id, [p.page for p in hit.pages]) == (fr, [2])
        assert "«pénalités»" in hit.pages[0].snippet
        # English stemming: "migrating warehouses" finds "warehouse migration".
        assert [h.document_id for h in search(conn, org, "migrating warehouses")] == [en]
        # Both documents mention an IBAN; the other org's document is never returned.
        assert {h.document_id for h in search(conn, org, "IBAN")} == {fr, en}
        assert search(conn, org, "ornithorynque") == []
        assert [h.filename for h in search(conn, other_org, "pénalité")] == ["autre.pdf"]


def test_fleet_doc_search_prints_documents_pages_and_snippets(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID
) -> None:
    fr = ingest_ready(doc_worker, db, org, text_pdf([INVOICE_FR, CONDITIONS_FR]), "facture.pdf")

    result = CliRunner().invoke(app, ["search", "audit sécurité", "--org", str(org), "--json"])

    assert result.exit_code == 0, result.output
    [hit] = json.loads(result.stdout)
    assert hit["document_id"] == str(fr) and hit["filename"] == "facture.pdf"
    assert hit["pages"][0]["page"] == 1 and "«Audit»" in hit["pages"][0]["snippet"]
    table = CliRunner().invoke(app, ["search", "audit", "--org", str(org)])
    assert table.exit_code == 0 and "facture.pdf" in table.stdout
