"""The doc step of `fleet demo` (registered as `workers.doc.demo:scenario`): a born-digital
invoice and a scanned one, generated here (fpdf2, pypdfium2: the doc extra), uploaded through
the client as the product API does (object storage, `file_objects` + `documents`, `doc:ingest`).

`text_pdf` and `scanned_pdf` also make the doc tests' documents (tests/workers/doc/pdfs.py).
"""

from __future__ import annotations

import io
import shutil
from uuid import UUID

from shared.cli.scenario import Scenario
from shared.runtime import Runtime

from .client import ingest_document
from .settings import doc_settings

INVOICE = """Northwind Trading Ltd
Invoice Number: INV-7731
Invoice Date: March 5, 2024
Bill To: Contoso LLC
Consulting services for the warehouse migration
Subtotal: $2,500.00
VAT (20%): $500.00
Total Due: $3,000.00"""
SCAN = """FACTURE N° SCAN-2024-7
Date : 05/02/2024
Total TTC : 360,00 EUR"""


def text_pdf(pages: list[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.core_fonts_encoding = "windows-1252"
    pdf.set_font("Helvetica", size=12)
    for page in pages:
        pdf.add_page()
        pdf.multi_cell(0, 7, page)
    return bytes(pdf.output())


def scanned_pdf(content: str, dpi: int = 200) -> bytes:
    """A page that is only an image of `content` (no text layer), as a scanner makes."""
    import pypdfium2 as pdfium
    from fpdf import FPDF

    source = pdfium.PdfDocument(text_pdf([content]))
    try:
        image = source[0].render(scale=dpi / 72, grayscale=True).to_pil()
    finally:
        source.close()
    png = io.BytesIO()
    image.save(png, format="PNG")
    pdf = FPDF()
    pdf.add_page()
    pdf.image(io.BytesIO(png.getvalue()), x=0, y=0, w=210, h=297)
    return bytes(pdf.output())


class Documents(Scenario):
    """A born-digital invoice and a scanned one (OCR by Tesseract), uploaded and ingested."""

    def __init__(self, org: UUID) -> None:
        super().__init__("doc")
        self.org = org
        self.documents: dict[str, UUID] = {}

    def start(self, rt: Runtime) -> None:
        files = {"invoice-born-digital.pdf": text_pdf([INVOICE])}
        tesseract = doc_settings().tesseract_cmd
        if shutil.which(tesseract):
            files["invoice-scanned.pdf"] = scanned_pdf(SCAN)
        else:
            self.notes.append(
                f"scanned document skipped: {tesseract} not found "
                "(workers/doc/install_tesseract.sh installs it)"
            )
        for name, data in files.items():
            self.documents[name] = self._upload(rt, name, data)

    def _upload(self, rt: Runtime, filename: str, data: bytes) -> UUID:
        from shared.storage import build_storage

        with rt.sessions() as session, session.begin():
            done = ingest_document(
                session,
                build_storage(rt.settings),
                org_id=self.org,
                filename=filename,
                data=data,
                max_bytes=doc_settings().max_bytes,
            )  # through the outbox: `doc:ingest` goes out once the rows are committed
        return done.document_id

    def pending(self, rt: Runtime) -> bool:
        with rt.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM documents WHERE id = ANY(%s) AND status IN ('READY', 'FAILED')",
                (list(self.documents.values()),),
            ).fetchone()
        return row is None or row[0] < len(self.documents)

    def results(self, rt: Runtime) -> list[str]:
        with rt.pool.connection() as conn:
            rows = conn.execute(
                "SELECT filename, status FROM documents WHERE id = ANY(%s) ORDER BY filename",
                (list(self.documents.values()),),
            ).fetchall()
        lines = [f"document {name}: {status}" for name, status in rows]
        lines.append(f'search: `fleet doc search "invoice" --org {self.org}` (or "facture")')
        return lines + self.notes


def scenario(org: UUID, *, small: bool) -> Scenario:
    """The same two documents for `fleet demo` and `fleet demo --small`."""
    return Documents(org)


__all__ = ["Documents", "scanned_pdf", "scenario", "text_pdf"]
