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
    """A terminal's own width; piped output gets a wide page instead of rich's 80 columns,
    unless COLUMNS says how wide."""
    if sys.stdout.isatty():
        return None
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        return 160


#: Below this width a list of runs prints each run as a line and its org and id on the next,
#: instead of a table whose id column would fold over ten lines.
NARROW = 120


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
    below: Sequence[str] = (),
    narrow: Mapping[str, int] | None = None,
) -> None:
    """`below`: columns (long ids) that a narrow terminal gets on a line of their own.
    `narrow`: the widest a column may be in the table (cut with "…"; whole in `below`)."""
    if below and out.width < NARROW:
        _print_records(columns, list(rows), title=title, below=below)
        return
    table = Table(title=title, show_lines=False, header_style="bold")
    for name in columns:
        table.add_column(
            name,
            overflow="fold" if name in fold else "ellipsis",
            no_wrap=name not in fold,
            min_width=len(name),
            max_width=(narrow or {}).get(name),
        )
    count = 0
    for row in rows:
        table.add_row(*row)
        count += 1
    if count:
        out.print(table)
    else:
        err.print(f"[dim]no {escape(title.lower()) if title else 'rows'}[/dim]")


def _print_records(
    columns: Sequence[str], rows: list[Sequence[Any]], *, title: str | None, below: Sequence[str]
) -> None:
    """Each row as a line of aligned cells, then `  name value` per `below` column but the
    last, whose value (an id) has a line of its own."""
    if not rows:
        err.print(f"[dim]no {escape(title.lower()) if title else 'rows'}[/dim]")
        return
    inline = [i for i, name in enumerate(columns) if name not in below]
    under = [columns.index(name) for name in below]
    widths = {i: max(len(columns[i]), *(len(str(row[i])) for row in rows)) for i in inline}
    if title:
        out.print(f"[bold]{title}[/bold]")
    header = "  ".join(columns[i].ljust(widths[i]) for i in inline).rstrip()
    out.print(f"[bold]{escape(header[: out.width])}[/bold]")
    for row in rows:
        line = "  ".join(str(row[i]).ljust(widths[i]) for i in inline).rstrip()
        out.print(line if len(line) <= out.width else line[: out.width - 1] + "…")
        *labelled, last = under
        for i in labelled:
            out.print(f"  [dim]{columns[i]}[/dim] {row[i]}")
        # The id alone, folded at the width: two lines at 80 columns, not ten.
        out.print(f"  {row[last]}", soft_wrap=False, overflow="fold")


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
