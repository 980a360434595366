"""A real typeset PDF: the bash manual page set by groff, as Debian's bash-doc ships it
(`workers/doc/install_test_pdfs.sh` installs it; the test set-up runs that script, so a missing
file is a failure, not a skip). Its justified lines are hyphenated at their ends, and PDFium
reports each such hyphen as the noncharacter U+FFFE with the line break dropped
("subex\\ufffepressions"): stored as is, the halves were indexed as two words and the snippets
showed the noncharacter."""

from __future__ import annotations

import io
import json
import re
import unicodedata
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pypdfium2 as pdfium
import pytest
from typer.testing import CliRunner

from workers.doc import pdf
from workers.doc.cli import app
from workers.doc.search import search

from .conftest import DocWorker, pages, wait_document

BASH_PDF = Path("/usr/share/doc/bash/bash.pdf")
#: A word PDFium reports as hyphenated at a line end: its two halves around U+FFFE.
HYPHENATED = re.compile(r"(\w+)\ufffe(\w+)")
#: The same, standing alone: PDFium also loses some spaces of groff's justified lines
#: ("re\ufffespectively.AND"), which makes another (URL-like) token of no concern here.
HYPHENATED_WORD = re.compile(r"(?<!\S)(\w+)\ufffe(\w+)(?=[^\w\s]*(?:\s|$))")


@pytest.fixture(scope="module")
def bash_pdf() -> bytes:
    assert BASH_PDF.is_file(), f"{BASH_PDF} is missing: run bash workers/doc/install_test_pdfs.sh"
    return BASH_PDF.read_bytes()


def raw_text(data: bytes, number: int) -> str:
    """What PDFium itself reports for page `number` (1-based)."""
    doc = pdfium.PdfDocument(data)
    try:
        textpage = doc[number - 1].get_textpage()
        return str(textpage.get_text_range())
    finally:
        doc.close()


def joined_words(raw: str, pattern: re.Pattern[str] = HYPHENATED) -> list[str]:
    return [a + b for a, b in pattern.findall(raw)]


def searchable(conn: psycopg.Connection[Any], words: set[str]) -> set[str]:
    """`words` but the English stop words ("below"), which no search finds."""
    return {
        w
        for w in words
        if conn.execute("SELECT numnode(websearch_to_tsquery('english', %s))", (w,)).fetchone()
        != (0,)
    }


def noise(text: str) -> set[str]:
    """Characters no reader sees: controls (but tab and line feed), noncharacters, private use."""
    return {
        f"U+{ord(ch):04X}"
        for ch in text
        if ch not in "\t\n" and unicodedata.category(ch) in ("Cc", "Cn", "Co", "Cs")
    }


def page_pdf(data: bytes, numbers: list[int]) -> bytes:
    """A PDF of some pages of `data`, copied as they are (fonts, text layer, positions)."""
    source, out = pdfium.PdfDocument(data), pdfium.PdfDocument.new()
    try:
        out.import_pages(source, [n - 1 for n in numbers])
        buffer = io.BytesIO()
        out.save(buffer)
        return buffer.getvalue()
    finally:
        out.close()
        source.close()


def test_line_end_hyphens_of_a_typeset_pdf_are_joined_and_noise_removed(bash_pdf: bytes) -> None:
    total = 0
    for number in range(1, pdf.inspect(bash_pdf).pages + 1):
        raw, text = raw_text(bash_pdf, number), pdf.page_text(bash_pdf, number)
        words = set(re.findall(r"\w+", text))
        missing = [w for w in joined_words(raw) if w not in words]
        assert not missing, f"page {number}: hyphenated words not joined: {missing}"
        assert not noise(text), f"page {number}: noise characters {noise(text)}"
        total += len(joined_words(raw))
    assert total > 600, "bash.pdf has some 650 line-end hyphens (the test needs them)"
    first = pdf.page_text(bash_pdf, 1)
    assert "includ\ufffeing" in raw_text(bash_pdf, 1) and "including −o" in first
    # groff's bracket piece (private use U+F8F4) in the synopsis of a pipeline is dropped.
    assert "\uf8f4" in raw_text(bash_pdf, 4) and "[[||&] command2" in pdf.page_text(bash_pdf, 4)


def test_a_typeset_pdf_is_searchable_by_its_hyphenated_words(
    doc_worker: DocWorker, db: psycopg.Connection[Any], org: uuid.UUID, bash_pdf: bytes
) -> None:
    numbers = [1, 4, 6]
    up = doc_worker.upload(page_pdf(bash_pdf, numbers), org=org, filename="bash.pdf")
    doc_worker.ingest(up, org)
    assert wait_document(db, up.document_id, "READY", "FAILED")["status"] == "READY"

    words = searchable(
        db, {w for n in numbers for w in joined_words(raw_text(bash_pdf, n), HYPHENATED_WORD)}
    )
    assert len(words) > 15 and {"including", "subexpressions", "precedence"} <= words
    with doc_worker.services.pool.connection() as conn:
        not_found = sorted(
            w for w in words if [h.document_id for h in search(conn, org, w)] != [up.document_id]
        )
    assert not not_found, (
        f"{len(not_found)} of {len(words)} hyphenated words not found: {not_found}"
    )
    stored = pages(db, up.document_id)
    assert [(p["method"], noise(p["text"])) for p in stored] == [("text-layer", set())] * 3

    result = CliRunner().invoke(app, ["search", "subexpressions", "--org", str(org), "--json"])
    assert result.exit_code == 0, result.output
    [hit] = json.loads(result.stdout)
    assert hit["pages"][0]["page"] == 3  # page 6 of bash.pdf is the third of the upload
    snippet = hit["pages"][0]["snippet"]
    assert "«subexpressions»" in snippet and not noise(snippet), snippet
