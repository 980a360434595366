"""Export types, registered in code by name: the rows they read, their columns and filters.

A type names its source (a table or a join, always filtered on `org_id`), the columns with a
kind (how each format writes them), the column its date range applies to, a stable order, and
the filters a request may use. Nothing of a request is put into SQL text: filter values and
dates are bound parameters; column and table names come only from these declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from shared.errors import PermanentError
from workers.export.contracts import EXPORT_TYPES, SHIPPED_TYPES

Kind = Literal["text", "int", "decimal", "date", "datetime", "bool", "json"]


@dataclass(frozen=True)
class Column:
    name: str  # header in the file
    sql: str  # expression over the source, e.g. "e.debit"
    kind: Kind = "text"
    width: float = 1.0  # relative width in the PDF table
    total: bool = False  # summed in the PDF totals row


@dataclass(frozen=True)
class Filter:
    sql: str  # the column it constrains
    kind: Literal["text", "int", "bool"] = "text"
    choices: tuple[str, ...] = ()  # allowed values (text), empty: any
    max_values: int = 100  # a list of values means "any of"
    casefold: bool = False  # values are lower-cased (the column expression is too)


@dataclass(frozen=True)
class ExportType:
    name: str
    title: str
    source: str  # FROM clause; its org column is `org_sql`
    table: str  # the table that must exist (named in the error when it does not)
    columns: tuple[Column, ...]
    order_by: str
    date_sql: str | None = None
    org_sql: str = "org_id"
    filters: dict[str, Filter] = field(default_factory=dict)
    #: The column of a source that lists jobs: the export's own job (RUNNING while it writes the
    #: file) is left out of it.
    own_job_sql: str | None = None

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


class UnknownExportType(PermanentError):
    """No export type of that name is registered."""

    code = "UNKNOWN_EXPORT_TYPE"


_TYPES: dict[str, ExportType] = {}


def register(export_type: ExportType) -> ExportType:
    if export_type.name in _TYPES:
        raise ValueError(f"export type {export_type.name} is registered twice")
    _TYPES[export_type.name] = export_type
    EXPORT_TYPES.add(export_type.name)  # `export:build` payloads of this process accept it
    return export_type


def unregister(name: str) -> None:
    """Forget a type registered at run time (tests); the shipped ones stay accepted."""
    _TYPES.pop(name, None)
    if name not in SHIPPED_TYPES:
        EXPORT_TYPES.discard(name)


def get(name: str) -> ExportType:
    from . import definitions  # noqa: F401  (registers the shipped types on first use)

    try:
        return _TYPES[name]
    except KeyError:
        raise UnknownExportType(
            f"unknown export type {name!r}; known: {', '.join(sorted(_TYPES))}"
        ) from None


def names() -> list[str]:
    from . import definitions  # noqa: F401

    return sorted(_TYPES)


def describe(export_type: ExportType) -> dict[str, Any]:
    return {
        "name": export_type.name,
        "title": export_type.title,
        "columns": [{"name": c.name, "kind": c.kind} for c in export_type.columns],
        "date_column": export_type.date_sql,
        "filters": {k: f.kind for k, f in export_type.filters.items()},
    }
