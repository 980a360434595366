"""From an export request to rows: the validated query, its count, and a server-side cursor.

`plan()` checks the request's filters against the type's declared ones (unknown name, wrong
type, value not allowed → `PermanentError` INVALID_FILTER) and builds the SQL with bound
parameters only. `open_rows()` runs the count and the rows in one REPEATABLE READ, READ ONLY
transaction (so `total` matches what is streamed) with the session in UTC, and yields the rows
through a named (server-side) cursor a batch at a time: memory is bounded whatever the
row count. With `as_text`, every value arrives as Postgres's text (no per-type parsing): the
fast path of CSV, ZIP and PDF.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg import errors as pg_errors
from psycopg.types.string import TextLoader

from shared.errors import PermanentError
from workers.export.contracts import ExportParams

from .registry import ExportType, Filter

#: Types loaded as text on the fast path (ints and bools parse fast and print the same).
TEXT_OIDS = ("numeric", "date", "timestamp", "timestamptz", "json", "jsonb", "uuid")


class InvalidFilter(PermanentError):
    """The export request has a filter the type does not accept."""

    code = "INVALID_FILTER"


class SourceMissing(PermanentError):
    """The table an export reads does not exist (yet)."""

    code = "SOURCE_MISSING"


@dataclass(frozen=True)
class Plan:
    export_type: ExportType
    select: str
    count: str
    params: dict[str, Any]


def plan(
    export_type: ExportType, params: ExportParams, org_id: UUID, *, own_job_id: str | None = None
) -> Plan:
    """The queries of an export; `own_job_id` (the building job) is left out of a list of jobs."""
    where = [f"{export_type.org_sql} = %(org_id)s"]
    bound: dict[str, Any] = {"org_id": org_id}
    if export_type.own_job_sql and own_job_id is not None:
        where.append(f"{export_type.own_job_sql} <> %(own_job_id)s")
        bound["own_job_id"] = own_job_id
    if params.date_range is not None and export_type.date_sql:
        where.append(f"{export_type.date_sql} >= %(date_start)s")
        where.append(f"{export_type.date_sql} < %(date_end)s")
        bound["date_start"] = params.date_range.start
        bound["date_end"] = params.date_range.end + timedelta(days=1)
    elif params.date_range is not None:
        raise InvalidFilter(f"{export_type.name} has no date column; remove date_range")
    for i, (name, value) in enumerate(sorted(params.filters.items())):
        spec = export_type.filters.get(name)
        if spec is None:
            known = ", ".join(sorted(export_type.filters)) or "none"
            raise InvalidFilter(f"{export_type.name} has no filter {name!r} (known: {known})")
        bound[f"f{i}"] = _values(name, spec, value)
        where.append(f"{spec.sql} = ANY(%(f{i})s)")
    source = f"FROM {export_type.source} WHERE {' AND '.join(where)}"
    columns = ", ".join(c.sql for c in export_type.columns)
    return Plan(
        export_type,
        select=f"SELECT {columns} {source} ORDER BY {export_type.order_by}",
        count=f"SELECT count(*) {source}",
        params=bound,
    )


def _values(name: str, spec: Filter, value: Any) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    if not values or len(values) > spec.max_values:
        raise InvalidFilter(f"filter {name!r} takes 1 to {spec.max_values} values")
    out: list[Any] = []
    for v in values:
        if isinstance(v, bool):
            if spec.kind != "bool":
                raise InvalidFilter(f"filter {name!r} takes {spec.kind} values, got {v!r}")
            out.append(v)
        elif spec.kind == "int" and isinstance(v, int):
            out.append(v)
        elif spec.kind == "text" and isinstance(v, str) and len(v) <= 320:
            v = v.lower() if spec.casefold else v
            if spec.choices and v not in spec.choices:
                raise InvalidFilter(
                    f"filter {name!r}: {v!r} is not one of {', '.join(spec.choices)}"
                )
            out.append(v)
        else:
            raise InvalidFilter(f"filter {name!r} takes {spec.kind} values, got {v!r}")
    return out


@dataclass
class Rows:
    total: int
    cursor: psycopg.Cursor[Any]

    def batches(self, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows, `size` at a time (one round trip each)."""
        while batch := self.cursor.fetchmany(size):
            yield batch


@contextmanager
def open_rows(
    conn: psycopg.Connection[Any], the_plan: Plan, *, as_text: bool = False
) -> Iterator[Rows]:
    """Count and stream the plan's rows in one snapshot; the transaction ends on exit."""
    name = the_plan.export_type.table
    try:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute("SET LOCAL TimeZone TO 'UTC'")
        row = conn.execute(the_plan.count, the_plan.params).fetchone()
        total = int(row[0]) if row else 0
        with conn.cursor(name=f"export_{id(the_plan):x}") as cur:
            if as_text:
                for oid in TEXT_OIDS:
                    cur.adapters.register_loader(oid, TextLoader)
            cur.execute(the_plan.select, the_plan.params)
            yield Rows(total, cur)
    except pg_errors.UndefinedTable as exc:
        conn.rollback()
        raise SourceMissing(
            f"table {name} does not exist yet ({the_plan.export_type.name})"
        ) from exc
    except pg_errors.UndefinedColumn as exc:
        conn.rollback()
        raise SourceMissing(
            f"table {name} lacks a column of {the_plan.export_type.name}: {exc}"
        ) from exc
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()  # read only: nothing to keep
