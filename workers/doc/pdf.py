"""Reading PDFs with PDFium (pypdfium2: Apache-2.0/BSD wheels with PDFium inside, no poppler).

PDFium is not thread-safe, and a worker runs several threads: every call into it holds one
process-wide lock. The calls are short (opening, extracting a text layer, rendering one page);
Tesseract, the slow part, runs outside the lock in its own process.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from shared.errors import PermanentError

_LOCK = threading.RLock()
#: The PDF header must start within the first KiB (PDF 1.7, annex H.3 implementation note 13).
_HEADER_WINDOW = 1024


class BadDocument(PermanentError):
    """The document cannot be processed (not a PDF, corrupt, encrypted, over a limit)."""

    code = "BAD_DOCUMENT"


@dataclass(frozen=True)
class PdfInfo:
    pages: int
    version: int | None


def _reason(exc: Exception) -> tuple[str, str]:
    code = getattr(exc, "err_code", None)
    if code == pdfium_c.FPDF_ERR_PASSWORD:
        return "ENCRYPTED", "the PDF is encrypted with a password"
    if code == pdfium_c.FPDF_ERR_SECURITY:
        return "ENCRYPTED", "the PDF uses an unsupported security handler"
    return "CORRUPT", f"the PDF is corrupt or unreadable ({exc})"


@contextmanager
def opened(data: bytes) -> Iterator[Any]:
    """The PDFium document of `data` (under the lock); integrity errors are `BadDocument`."""
    if b"%PDF-" not in data[:_HEADER_WINDOW]:
        raise BadDocument("not a PDF (no %PDF- header)", code="NOT_A_PDF")
    with _LOCK:
        try:
            doc = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            code, message = _reason(exc)
            raise BadDocument(message, code=code) from None
        try:
            yield doc
        finally:
            doc.close()


def inspect(data: bytes) -> PdfInfo:
    """Check that `data` opens as a PDF with at least one page; raise `BadDocument` otherwise."""
    with opened(data) as doc:
        pages = len(doc)
        version = doc.get_version()
    if pages < 1:
        raise BadDocument("the PDF has no pages", code="CORRUPT")
    return PdfInfo(pages=pages, version=version)


def _page(doc: Any, number: int) -> Any:
    if not 1 <= number <= len(doc):
        raise BadDocument(f"page {number} is outside 1..{len(doc)}", code="NO_SUCH_PAGE")
    return doc[number - 1]


def page_text(data: bytes, number: int) -> str:
    """The text layer of page `number` (1-based); empty for a scanned page."""
    with opened(data) as doc:
        page = _page(doc, number)
        try:
            textpage = page.get_textpage()
            try:
                text: str = textpage.get_text_range()
            finally:
                textpage.close()
        finally:
            page.close()
    return normalize(text)


def render_png(data: bytes, number: int, dpi: int) -> bytes:
    """Page `number` rendered to a greyscale PNG at `dpi` (what Tesseract reads)."""
    import io

    with opened(data) as doc:
        page = _page(doc, number)
        try:
            bitmap = page.render(scale=dpi / 72, grayscale=True)
            image = bitmap.to_pil()
        finally:
            page.close()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


#: A line-end hyphen as text extraction reports it: PDFium marks the hyphen it recognises at
#: the end of a line of a typeset PDF (TeX, groff) as the noncharacter U+FFFE and drops the line
#: break ("subex\ufffepressions"); a soft hyphen (U+00AD) can also stand there. Either joins
#: the two halves of the word, with the line break and indentation that may follow it.
_LINE_HYPHEN = re.compile(r"[\ufffe\u00ad][^\S\n]*(?:\n[^\S\n]*)?")
#: What no reader sees and no search can match: C0/C1 controls (but tab and line feed), the
#: noncharacters (U+FDD0..U+FDEF, U+xFFFE/U+xFFFF) and private-use code points (glyphs of a
#: font without a Unicode mapping, e.g. groff's bracket pieces at U+F8F4).
_NOISE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ufdd0-\ufdef\ue000-\uf8ff\ufffe\uffff"
    "\U000f0000-\U0010ffff"
    + "".join(f"{chr(plane << 16 | 0xFFFE)}{chr(plane << 16 | 0xFFFF)}" for plane in range(1, 15))
    + "]"
)


def normalize(text: str) -> str:
    """Clean extracted text for storage and search: line ends to `\\n`, hyphenated words at a
    line end joined, noise characters removed (NUL among them: Postgres text rejects it),
    trailing blanks trimmed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _NOISE.sub("", _LINE_HYPHEN.sub("", text))
    lines = [line.rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip()
