"""CSV: UTF-8, RFC 4180 (comma, CRLF, fields quoted when needed, quotes doubled), a header row;
with `params.bom`, a UTF-8 byte order mark first (Excel on Windows reads BOM-less UTF-8 as ANSI).

Rows are formatted a batch at a time by the C `csv` writer into a string buffer, encoded once
and written: the text cells are neutralised first (`cells.guard_rows`).
"""

from __future__ import annotations

import codecs
import csv
import io
from typing import IO

from ..cells import guard_rows, text_indexes
from ..registry import ExportType
from . import Batches, Format, Meta, Written


def write_csv(out: IO[bytes], export_type: ExportType, batches: Batches, meta: Meta) -> Written:
    if meta.params.get("bom"):
        out.write(codecs.BOM_UTF8)
    buffer = io.StringIO()
    writer = csv.writer(buffer, dialect="excel", lineterminator="\r\n")
    writer.writerow(export_type.column_names())
    guard = text_indexes(export_type.columns)
    rows = 0
    for batch in batches:
        writer.writerows(guard_rows(batch, guard))
        rows += len(batch)
        out.write(buffer.getvalue().encode("utf-8"))
        buffer.seek(0)
        buffer.truncate()
    out.write(buffer.getvalue().encode("utf-8"))
    return Written(rows)


FORMAT = Format("CSV", "csv", "text/csv; charset=utf-8", as_text=True, write=write_csv)
