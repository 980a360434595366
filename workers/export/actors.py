"""Actors of the export worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from functools import partial
from typing import Any

from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import Handler, bind_handlers
from shared.jobs.spec import JobSpec
from workers.export.contracts import ExportBuildV2

from .build import build_export
from .wiring import get_exporter


def handle_build(payload: ExportBuildV2, job: JobContext) -> dict[str, Any]:
    return build_export(payload, job, get_exporter())


#: By job declaration; `app` binds them to the worker's broker (importing this boots nothing).
HANDLERS: dict[JobSpec[Any], Handler[Any]] = {
    catalog.EXPORT_BUILD: handle_build,
}

#: Bind them to a broker (default: the process's global one): `app`, or a test's own.
bind = partial(bind_handlers, HANDLERS)
