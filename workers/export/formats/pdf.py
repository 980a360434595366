"""PDF: a paginated table report with fpdf2 (landscape A4): title, period, filters and
generation time on the first page, the column header repeated on every page, a totals row (row
count and the sums of the columns marked `total`), "Page n/N" footers. Text longer than its cell
is cut with an ellipsis.

The text is set in the TrueType font of EXPORT_PDF_FONT (DejaVu Sans from Debian's
fonts-dejavu-core by default: Latin, Greek, Cyrillic, punctuation such as `€ — œ ’`), embedded
as a subset with its Unicode map, so every character of the data prints and can be copied or
searched. When the font file is missing the report falls back to the built-in Helvetica, which
covers Latin-1 only (other characters print as `?`), and logs `export.pdf_font_missing`.

Characters the font lacks are set glyph by glyph in the fonts of EXPORT_PDF_FALLBACK_FONTS
(Droid Sans Fallback by default: Chinese, Japanese, Korean). A character no font covers prints
as a visible replacement mark (before: nothing, an empty cell in a COMPLETED export), is logged
(`export.pdf_glyphs_missing`) and listed in the export's result under `warnings`.
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import structlog

from ..cells import as_text, decimal_of
from ..registry import ExportType
from . import Batches, Format, Meta, Written

log = structlog.get_logger("jobfleet.export")

FONT_SIZE = 7
LINE_H = 4.2
EMBEDDED = "body"  # the family name the embedded font is registered under
#: What stands for a character no font covers (U+FFFD when a font has it, else `?`).
REPLACEMENT = "\ufffd"


def _latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def _report_class() -> type:
    from fpdf import FPDF

    class Report(FPDF):
        names: list[str]
        widths: list[float]
        report_font = "Helvetica"

        #: Code points some embedded font covers (None: the built-in font, Latin-1 only).
        covered: set[int] | None = None
        replacement = "?"
        #: Characters no font covers, as met.
        missing: dict[str, int]

        def text_of(self, text: str) -> str:
            """`text` as the fonts can print it (the built-in one: Latin-1 only)."""
            if self.covered is None:
                return _latin1(text)
            if all(ord(ch) in self.covered or ch in " \t" for ch in text):
                return text
            shown = []
            for ch in text:
                if ord(ch) in self.covered or ch in " \t":
                    shown.append(ch)
                else:
                    self.missing[ch] = self.missing.get(ch, 0) + 1
                    shown.append(self.replacement)
            return "".join(shown)

        def header(self) -> None:
            if self.page_no() > 1:
                self.table_header()

        def footer(self) -> None:
            self.set_y(-10)
            self.set_font(self.report_font, "I", 7)
            self.cell(0, 4, f"Page {self.page_no()}/{{nb}}", align="C")

        def table_header(self) -> None:
            self.set_font(self.report_font, "B", FONT_SIZE)
            for name, width in zip(self.names, self.widths, strict=True):
                self.cell(width, LINE_H + 1, self.text_of(name), border=1)
            self.ln()
            self.set_font(self.report_font, size=FONT_SIZE)

    return Report


def _embed_font(pdf: Any, meta: Meta) -> str:
    """Register the configured TrueType font as the report's family; returns its name."""
    regular = Path(meta.pdf_font) if meta.pdf_font else None
    if regular is None or not regular.is_file():
        if meta.pdf_font:
            log.warning("export.pdf_font_missing", path=meta.pdf_font, fallback="Helvetica")
        return "Helvetica"
    bold = Path(meta.pdf_font_bold) if meta.pdf_font_bold else regular
    if not bold.is_file():
        log.warning("export.pdf_font_missing", path=meta.pdf_font_bold, fallback=str(regular))
        bold = regular
    # fontTools logs every step of the subsetting done at output at INFO: a dozen lines a report.
    logging.getLogger("fontTools.subset").setLevel(logging.WARNING)
    pdf.add_font(EMBEDDED, "", str(regular))
    pdf.add_font(EMBEDDED, "B", str(bold))
    pdf.add_font(EMBEDDED, "I", str(regular))  # the footer only: no italic face is needed
    pdf.report_font = EMBEDDED
    covered = set(pdf.fonts[EMBEDDED].cmap)
    fallbacks = []
    for index, path in enumerate(meta.pdf_fallback_fonts):
        if not Path(path).is_file():
            log.warning("export.pdf_font_missing", path=path, role="fallback")
            continue
        name = f"fallback{index}"
        pdf.add_font(name, "", path)
        covered |= set(pdf.fonts[name].cmap)
        fallbacks.append(name)
    if fallbacks:
        pdf.set_fallback_fonts(fallbacks, exact_match=False)
    pdf.covered = covered
    pdf.replacement = REPLACEMENT if ord(REPLACEMENT) in covered else "?"
    return regular.stem


def write_pdf(out: IO[bytes], export_type: ExportType, batches: Batches, meta: Meta) -> Written:
    columns = export_type.columns
    pdf: Any = _report_class()(orientation="L", unit="mm", format="A4")
    pdf.set_margins(10, 10, 10)
    pdf.set_auto_page_break(auto=True, margin=12)
    usable = pdf.w - pdf.l_margin - pdf.r_margin
    scale = usable / sum(c.width for c in columns)
    pdf.missing = {}
    pdf.names = export_type.column_names()
    pdf.widths = [c.width * scale for c in columns]
    font = _embed_font(pdf, meta)
    text_of = pdf.text_of
    pdf.set_font(pdf.report_font, size=FONT_SIZE)
    # Characters that fit a cell, estimated once per column from the width of a digit.
    fits = [max(3, int(w / pdf.get_string_width("0")) - 1) for w in pdf.widths]
    aligns = ["R" if c.kind in ("int", "decimal") else "L" for c in columns]

    pdf.add_page()
    pdf.set_font(pdf.report_font, "B", 14)
    pdf.cell(0, 8, text_of(meta.title), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(pdf.report_font, size=8)
    for line in _header_lines(meta):
        pdf.cell(0, 4.5, text_of(line), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)
    pdf.table_header()

    totals = {i: Decimal(0) for i, c in enumerate(columns) if c.total}
    rows = 0
    for batch in batches:
        for values in batch:
            for i, value in enumerate(values):
                text = as_text(value)
                if len(text) > fits[i]:
                    text = text[: fits[i] - 3] + "..."
                pdf.cell(pdf.widths[i], LINE_H, text_of(text), border="B", align=aligns[i])
                if i in totals:
                    totals[i] += decimal_of(value)
            pdf.ln()
            rows += 1
    pdf.set_font(pdf.report_font, "B", FONT_SIZE)
    for i, width in enumerate(pdf.widths):
        text = f"Total: {rows} rows" if i == 0 else (format(totals[i], "f") if i in totals else "")
        pdf.cell(width, LINE_H + 1, text, border="T", align="R" if i in totals else "L")
    pdf.ln()
    out.write(bytes(pdf.output()))
    shown_totals = {columns[i].name: format(v, "f") for i, v in totals.items()}
    extra: dict[str, Any] = {"pages": pdf.pages_count, "totals": shown_totals, "font": font}
    if pdf.missing:
        sample = "".join(sorted(pdf.missing)[:20])
        count = sum(pdf.missing.values())
        warning = (
            f"{count} character(s) no font covers printed as {pdf.replacement!r}: {sample!r} "
            "(add a font that has them to EXPORT_PDF_FALLBACK_FONTS)"
        )
        log.warning(
            "export.pdf_glyphs_missing", export_id=meta.export_id, count=count, sample=sample
        )
        extra["warnings"] = [warning]
    return Written(rows, extra)


def _header_lines(meta: Meta) -> list[str]:
    params: dict[str, Any] = meta.params
    span = params.get("date_range")
    period = f"{span['start']} to {span['end']}" if span else "all dates"
    filters = params.get("filters") or {}
    shown = ", ".join(
        f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in sorted(filters.items())
    )
    return [
        f"Period: {period}",
        f"Filters: {shown or 'none'}",
        f"Rows: {meta.total}   Generated: {meta.generated_at}   Export: {meta.export_id}",
    ]


FORMAT = Format("PDF", "pdf", "application/pdf", as_text=True, write=write_pdf)
