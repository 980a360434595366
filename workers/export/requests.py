"""The producer side: request an export (the product API or `fleet export create`).

The `exports` row and the `export:build` job are written in one transaction through the outbox
(no commit, no job; a commit, exactly one job). The request is validated first: unknown type,
format or filter raises at once, in the caller's request, not later in the worker.
"""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

from sqlalchemy import text

from shared import outbox
from shared.contracts.export import ExportBuildV1, ExportParams
from shared.jobs import catalog
from shared.runtime import Runtime

from . import query, registry


def request_export(
    runtime: Runtime,
    *,
    org_id: UUID,
    requested_by: UUID,
    type: str,
    params: ExportParams | dict[str, Any] | None = None,
) -> tuple[UUID, str]:
    """Insert the export and stage its job; returns (export id, job id)."""
    export_params = (
        params if isinstance(params, ExportParams) else ExportParams.model_validate(params or {})
    )
    query.plan(registry.get(type), export_params, org_id)  # raises on a bad type or filter
    export_id = uuid.uuid4()
    payload = ExportBuildV1(
        org_id=org_id,
        entity_id=export_id,
        requested_by=requested_by,
        type=type,
        params=export_params,
    )
    with runtime.sessions() as session, session.begin():
        session.execute(
            text(
                "INSERT INTO exports (id, org_id, requested_by, type, params) "
                "VALUES (:id, :org, :by, :type, CAST(:params AS jsonb))"
            ),
            {
                "id": export_id,
                "org": org_id,
                "by": requested_by,
                "type": type,
                "params": export_params.model_dump_json(),
            },
        )
        event = outbox.enqueue(session, catalog.EXPORT_BUILD, payload)
    return export_id, event.job_id
