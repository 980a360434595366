"""XLSX with xlsxwriter in constant-memory mode: each row is flushed to a temporary file as it
is written, then the workbook is zipped into the output stream. Numbers stay numbers, dates are
Excel dates (UTC), text cells are written as strings: never parsed as formulas, numbers or
URLs, so they hold the data exactly (no formula guard: a string cell is not a formula, and the
`'` that CSV needs would only alter the value here). A sheet holds at most 1,048,575 data rows;
more go to the next sheet.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import IO, Any

from ..registry import ExportType
from . import Batches, Format, Meta, Written

MAX_DATA_ROWS = 1_048_575  # Excel's limit is 1,048,576 rows, the header included
OPTIONS = {
    "constant_memory": True,
    "strings_to_numbers": False,
    "strings_to_formulas": False,
    "strings_to_urls": False,
    "remove_timezone": True,
}


_CR_ESCAPE = re.compile(r"(?<!_x005F)_x000D_")


def _sheet_class() -> type:
    """xlsxwriter's worksheet, writing a carriage return as the XML character reference `&#13;`
    instead of OOXML's `_x000D_`. Both mean CR to Excel and LibreOffice, but openpyxl (and
    other readers that skip the ST_Xstring escapes) read `_x000D_` back as those 7 characters:
    `'\r=1+1'` came back `'_x000D_=1+1'`. (A literal `_x000D_` in the data is written
    `_x005F_x000D_` and left alone.)"""
    from xlsxwriter.worksheet import Worksheet

    class Sheet(Worksheet):  # type: ignore[misc]
        def _escape_data(self, data: Any) -> Any:
            escaped = super()._escape_data(data)
            if isinstance(escaped, str) and "_x000D_" in escaped:
                return _CR_ESCAPE.sub("&#13;", escaped)
            return escaped

    return Sheet


def write_xlsx(out: IO[bytes], export_type: ExportType, batches: Batches, meta: Meta) -> Written:
    import xlsxwriter

    sheet_class = _sheet_class()

    with tempfile.TemporaryDirectory(prefix="jobfleet-xlsx-") as tmp:
        book = xlsxwriter.Workbook(out, {**OPTIONS, "tmpdir": tmp})
        header = book.add_format({"bold": True})
        formats = {
            "date": book.add_format({"num_format": "yyyy-mm-dd"}),
            "datetime": book.add_format({"num_format": "yyyy-mm-dd hh:mm:ss"}),
            "decimal": book.add_format({"num_format": "#,##0.00"}),
        }
        names = export_type.column_names()
        sheets = 0
        sheet: Any = None
        row_in_sheet = MAX_DATA_ROWS
        rows = 0
        cells = [_cell_writer(c.kind, formats) for c in export_type.columns]
        for batch in batches:
            for values in batch:
                if row_in_sheet >= MAX_DATA_ROWS:
                    sheets += 1
                    sheet = book.add_worksheet(
                        "Data" if sheets == 1 else f"Data {sheets}", worksheet_class=sheet_class
                    )
                    sheet.write_row(0, 0, names, header)
                    sheet.freeze_panes(1, 0)
                    row_in_sheet = 0
                row_in_sheet += 1
                for col, value in enumerate(values):
                    if value is not None:
                        cells[col](sheet, row_in_sheet, col, value)
                rows += 1
        if sheet is None:
            sheet = book.add_worksheet("Data", worksheet_class=sheet_class)
            sheet.write_row(0, 0, names, header)
        book.close()
    return Written(rows, {"sheets": max(sheets, 1)})


CellWriter = Callable[[Any, int, int, Any], Any]


def _cell_writer(kind: str, formats: dict[str, Any]) -> CellWriter:
    if kind == "int":
        return lambda s, r, c, v: s.write_number(r, c, v)
    if kind == "decimal":
        fmt = formats["decimal"]
        return lambda s, r, c, v: s.write_number(
            r, c, float(v) if isinstance(v, Decimal) else v, fmt
        )
    if kind in ("date", "datetime"):
        fmt = formats[kind]

        def write_date(s: Any, r: int, c: int, v: Any) -> Any:
            if isinstance(v, datetime | date):
                return s.write_datetime(r, c, v, fmt)
            return s.write_string(r, c, str(v))

        return write_date
    if kind == "bool":
        return lambda s, r, c, v: s.write_boolean(r, c, bool(v))
    if kind == "json":
        return lambda s, r, c, v: s.write_string(r, c, v if isinstance(v, str) else json.dumps(v))
    return lambda s, r, c, v: s.write_string(r, c, str(v))


FORMAT = Format(
    "XLSX",
    "xlsx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    as_text=False,
    write=write_xlsx,
)
