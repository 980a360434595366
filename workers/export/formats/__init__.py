"""Output formats of the export worker, by name.

Each writer takes the binary stream of the object being stored, the export type and the row
batches (already counted for progress by the caller), writes the whole file and returns what it
wrote. None of them holds more than one batch of rows in memory, except PDF, which is bounded by
EXPORT_PDF_MAX_ROWS (its whole document is built before it is written).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..registry import ExportType


@dataclass(frozen=True)
class Meta:
    """What a file says about itself (PDF header, ZIP manifest), and the PDF font files."""

    export_id: str
    org_id: str
    title: str
    format: str
    generated_at: str
    params: dict[str, Any]
    total: int
    pdf_font: str = ""  # TrueType files (EXPORT_PDF_FONT, _BOLD); empty: built-in Helvetica
    pdf_font_bold: str = ""
    #: Fonts for the characters EXPORT_PDF_FONT lacks (CJK...), tried in order, glyph by glyph.
    pdf_fallback_fonts: tuple[str, ...] = ()


@dataclass
class Written:
    rows: int
    extra: dict[str, Any] = field(default_factory=dict)


Batches = Iterator[list[tuple[Any, ...]]]
Writer = Callable[[IO[bytes], ExportType, Batches, Meta], Written]


@dataclass(frozen=True)
class Format:
    name: str
    extension: str
    content_type: str
    as_text: bool  # rows arrive as Postgres text (fast path) rather than typed values
    write: Writer


def get(name: str) -> Format:
    from . import csv, pdf, xlsx, zip

    formats = {f.name: f for f in (csv.FORMAT, xlsx.FORMAT, pdf.FORMAT, zip.FORMAT)}
    return formats[name]
