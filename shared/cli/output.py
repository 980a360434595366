"""How the `fleet` commands print: rich tables for humans, JSON for machines, one-line errors.

Dates are ISO-8601 everywhere; JSON goes to stdout untouched by rich (no wrapping, no colour),
so `fleet ... --json | jq` works; messages and errors go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any
from uuid import UUID

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _width() -> int | None:
    """A terminal's own width; piped output gets a wide page instead of rich's 80 columns."""
    if sys.stdout.isatty():
        return None
    try:
        return max(int(os.environ.get("COLUMNS", "0")), 160)
    except ValueError:
        return 160


#: Human output; `soft_wrap` keeps long job ids on one line when stdout is a pipe.
out = Console(soft_wrap=True, highlight=False, emoji=False, width=_width())
err = Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)


def jsonable(value: Any) -> Any:
    """Datetimes as ISO text, UUIDs as text, containers recursively."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(jsonable(value), indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def cell(value: Any, *, width: int | None = None) -> str:
    """One table cell: ISO dates (seconds), compact JSON for structures, '' for None."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.isoformat(timespec="seconds")
    elif isinstance(value, dict | list):
        text = json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))
    else:
        text = str(value)
    if width is not None:
        first = text.splitlines()[0] if text else ""
        text = first if len(first) <= width else first[: width - 1] + "…"
    return escape(text)


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    fold: Sequence[str] = (),
) -> None:
    table = Table(title=title, show_lines=False, header_style="bold")
    for name in columns:
        table.add_column(
            name,
            overflow="fold" if name in fold else "ellipsis",
            no_wrap=name not in fold,
            min_width=len(name),
        )
    count = 0
    for row in rows:
        table.add_row(*row)
        count += 1
    if count:
        out.print(table)
    else:
        err.print(f"[dim]no {escape(title.lower()) if title else 'rows'}[/dim]")


def print_fields(fields: Mapping[str, Any], *, title: str | None = None) -> None:
    """A vertical key/value table (every field of one record)."""
    table = Table(title=title, show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, value in fields.items():
        table.add_row(escape(name), cell(value))
    out.print(table)


def note(message: str) -> None:
    """A human message (stderr, so stdout stays parseable)."""
    err.print(message)


def error_line(message: str) -> None:
    """The one-line red error every failed command ends with."""
    single = " ".join(message.split())
    err.print(f"[bold red]error:[/bold red] [red]{escape(single)}[/red]")
