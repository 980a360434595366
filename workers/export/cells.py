"""Cell values as files show them, and the formula-injection guard of CSV.

A spreadsheet opening a CSV treats a cell that starts with `=`, `+`, `-` or `@` (and, in some
programs, a tab or carriage return) as a formula: a value a user controls (an email subject, a
ledger label) could run `=HYPERLINK(...)` or DDE on the machine of whoever opens the export.
Text cells that start with one of these are prefixed with a single quote, which shows the text
as typed. Only text columns are guarded: numbers and dates are written as such (`-12.50` stays
a number). XLSX needs no guard: its text cells are typed strings, which are never formulas.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from .registry import Column

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def text_indexes(columns: Sequence[Column]) -> tuple[int, ...]:
    return tuple(i for i, c in enumerate(columns) if c.kind in ("text", "json"))


def guard_rows(rows: list[tuple[Any, ...]], indexes: tuple[int, ...]) -> list[Any]:
    """`rows` with their text cells neutralised (rows without a trigger are kept as they are)."""
    if not indexes:
        return rows
    out: list[Any] = []
    append = out.append
    for row in rows:
        for i in indexes:
            v = row[i]
            if v and v.startswith(FORMULA_PREFIXES):
                cells = list(row)
                for j in indexes:
                    w = cells[j]
                    if w and w.startswith(FORMULA_PREFIXES):
                        cells[j] = "'" + w
                append(cells)
                break
        else:
            append(row)
    return out


def as_text(value: Any) -> str:
    """Any value as text (PDF cells, manifest): ISO dates, plain decimals, compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def decimal_of(value: Any) -> Decimal:
    """A number for totals (values arrive as text on the fast path)."""
    if value is None or value == "":
        return Decimal(0)
    return value if isinstance(value, Decimal) else Decimal(str(value))
