"""The export domain's producer API: request an export in the caller's transaction, and get the
download link of a finished one.

    from workers.export.client import request_export

    with sessions() as session, session.begin():
        export = request_export(session, org_id=org, requested_by=user, type="JOB_RUNS",
                                params={"format": "CSV", "filters": {"status": ["DEAD"]}})

The request is checked before anything is written (`PayloadError` naming the field): the
`export:build` contract (format, date range, BOM), the export type and its filters. Then the
`exports` row (id generated here) and its `export:build` job (the outbox by default) go into the
caller's transaction: no commit, no export and no job.

Importing this module boots nothing (no broker, no logging, no runtime).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import text

from shared import outbox
from shared.errors import PayloadError
from shared.jobs import catalog
from workers.export.contracts import ExportBuildV2, ExportParams

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

Via = outbox.Via

INSERT = text(
    "INSERT INTO exports (id, org_id, requested_by, type, params) "
    "VALUES (:id, :org_id, :requested_by, :type, CAST(:params AS jsonb))"
)


@dataclass(frozen=True)
class ExportRequest:
    export_id: UUID
    job_id: str


def export_types() -> dict[str, dict[str, Any]]:
    """Every export type a producer may request: title, columns, date column and filters."""
    from . import registry

    return {name: registry.describe(registry.get(name)) for name in registry.names()}


def check_request(payload: ExportBuildV2) -> None:
    """`PayloadError` for an unknown type or a filter/date range the type does not take."""
    from . import query, registry

    try:
        export_type = registry.get(payload.type)
    except registry.UnknownExportType as exc:
        raise PayloadError(
            catalog.EXPORT_BUILD.name, [{"loc": ("type",), "msg": str(exc)}]
        ) from None
    try:
        query.plan(export_type, payload.params, payload.org_id)
    except query.InvalidFilter as exc:
        loc = ("params", "date_range") if "date_range" in str(exc) else ("params", "filters")
        raise PayloadError(catalog.EXPORT_BUILD.name, [{"loc": loc, "msg": str(exc)}]) from None


def request_export(
    session: Session,
    *,
    org_id: UUID,
    requested_by: UUID,
    type: str,
    params: ExportParams | Mapping[str, Any] | None = None,
    via: Via = "outbox",
    request_id: str | None = None,
) -> ExportRequest:
    """Validate, insert the `exports` row and stage `export:build` in `session`'s transaction
    (the caller commits). `via="send"` also publishes it from this process right after the commit, without waiting for
    the relay; either way nothing is published before the commit and a rollback drops it."""
    export_id = uuid.uuid4()
    payload = catalog.EXPORT_BUILD.build(
        {
            "org_id": org_id,
            "entity_id": export_id,
            "requested_by": requested_by,
            "type": type,
            "params": params.model_dump() if isinstance(params, ExportParams) else (params or {}),
        }
    )
    check_request(payload)
    session.execute(
        INSERT,
        {
            "id": export_id,
            "org_id": org_id,
            "requested_by": requested_by,
            "type": payload.type,
            "params": payload.params.model_dump_json(),
        },
    )
    job_id = outbox.stage(session, catalog.EXPORT_BUILD, payload, via=via, request_id=request_id)
    return ExportRequest(export_id, job_id)


def download_url(export_id: UUID, org_id: UUID, *, ttl_s: int | None = None) -> str:
    """A signed, expiring link to a COMPLETED export of `org_id`. Raises `ExportUnavailable`
    (code NOT_FOUND: no such export for this org) or `InvalidState` (not COMPLETED yet)."""
    from .downloads import export_url
    from .wiring import get_exporter

    return export_url(get_exporter(), export_id, org_id, ttl_s=ttl_s)


def export_status(export_id: UUID, org_id: UUID) -> dict[str, Any] | None:
    """The export's row as a product shows it (None: no such export for this org)."""
    from . import store
    from .wiring import get_exporter

    with get_exporter().pool.connection() as conn:
        row = store.get(conn, export_id, org_id)
    if row is None:
        return None
    return {
        "export_id": row.id,
        "type": row.type,
        "status": row.status,
        "progress": row.progress,
        "row_count": row.row_count,
        "error_code": row.error_code,
        "error": row.error,
    }


__all__ = [
    "ExportRequest",
    "check_request",
    "download_url",
    "export_status",
    "export_types",
    "request_export",
]
