"""The producer side for callers without a transaction of their own (`fleet export create`):
request an export in a session of the runtime, committed here.

The `exports` row and the `export:build` job are written in one transaction through the outbox
(no commit, no job; a commit, exactly one job). The request is validated first by
`workers.export.client.request_export`: unknown type, format or filter raises at once, in the
caller's request, not later in the worker.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from shared.runtime import Runtime
from workers.export.contracts import ExportParams

from . import client


def request_export(
    runtime: Runtime,
    *,
    org_id: UUID,
    requested_by: UUID,
    type: str,
    params: ExportParams | dict[str, Any] | None = None,
) -> tuple[UUID, str]:
    """Insert the export and stage its job; returns (export id, job id)."""
    with runtime.sessions() as session, session.begin():
        request = client.request_export(
            session, org_id=org_id, requested_by=requested_by, type=type, params=params
        )
    return request.export_id, request.job_id
