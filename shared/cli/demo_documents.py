"""The demo's documents (`fleet demo`): a born-digital invoice and a scanned one, generated
here (fpdf2, pypdfium2: the doc extra), stored and recorded as the product API's upload does
(`file_objects` + `documents`), then handed to `doc:ingest`."""

from __future__ import annotations

import io
import shutil
import uuid
from uuid import UUID

from shared.jobs import catalog
from shared.runtime import Runtime

from .demo_workload import Scenario

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
        if shutil.which(rt.settings.doc_tesseract_cmd):
            files["invoice-scanned.pdf"] = scanned_pdf(SCAN)
        else:
            self.notes.append(
                f"scanned document skipped: {rt.settings.doc_tesseract_cmd} not found "
                "(workers/doc/install_tesseract.sh installs it)"
            )
        for name, data in files.items():
            self.documents[name] = self._upload(rt, name, data)

    def _upload(self, rt: Runtime, filename: str, data: bytes) -> UUID:
        from shared.storage.backend import object_key
        from shared.storage.factory import build_storage

        document_id, file_id = uuid.uuid4(), uuid.uuid4()
        key = object_key(self.org, "documents", document_id, filename)
        stored = build_storage(rt.settings).put(key, data, "application/pdf")
        with rt.pool.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO file_objects (id, org_id, provider, bucket, key, content_type,"
                " size_bytes, sha256) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (file_id, self.org, stored.provider, stored.bucket, stored.key,
                 stored.content_type, stored.size_bytes, stored.sha256),
            )  # fmt: skip
            conn.execute(
                "INSERT INTO documents (id, org_id, file_object_id, filename, schema_name)"
                " VALUES (%s, %s, %s, %s, 'auto')",
                (document_id, self.org, file_id, filename),
            )
        catalog.DOC_INGEST.send(
            {"org_id": self.org, "entity_id": document_id, "file_object_id": file_id}
        )
        return document_id

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
