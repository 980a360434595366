"""Actors of the export worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from typing import Any

import dramatiq

from shared.contracts.export import ExportBuildV2
from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import BoundJob, handler

from . import app as _app  # noqa: F401  (the worker's broker: boots before the handlers bind)
from .build import build_export
from .wiring import get_exporter


def handle_build(payload: ExportBuildV2, job: JobContext) -> dict[str, Any]:
    return build_export(payload, job, get_exporter())


def bind(broker: dramatiq.Broker | None = None) -> dict[str, BoundJob[Any]]:
    """Bind the handler to `broker` (default: the process's global broker); tests bind their own."""
    return {catalog.EXPORT_BUILD.name: handler(catalog.EXPORT_BUILD, broker=broker)(handle_build)}


#: `build_export_job.send(payload)`: the producer path, same as `catalog.EXPORT_BUILD.send`.
build_export_job = bind()[catalog.EXPORT_BUILD.name]
