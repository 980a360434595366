"""Actors of the ai worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from typing import Any

import dramatiq

from shared.contracts.ai import AiRunV1
from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import BoundJob, handler

from . import app as _app  # noqa: F401  (the worker's broker: boots before the handlers bind)
from .run import run_task
from .wiring import get_ai


def handle_run(payload: AiRunV1, job: JobContext) -> dict[str, Any]:
    return run_task(payload, job, get_ai())


def bind(broker: dramatiq.Broker | None = None) -> dict[str, BoundJob[Any]]:
    """Bind the handlers to `broker` (default: the process's global broker); tests bind their own."""
    return {catalog.AI_RUN.name: handler(catalog.AI_RUN, broker=broker)(handle_run)}


#: `run_ai.send(payload)`: the producer path (DESIGN §2), same as `catalog.AI_RUN.send`.
run_ai = bind()[catalog.AI_RUN.name]
