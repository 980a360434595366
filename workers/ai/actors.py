"""Actors of the ai worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from functools import partial
from typing import Any

from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import Handler, bind_handlers
from shared.jobs.spec import JobSpec
from workers.ai.contracts import AiRunV1

from .run import run_task
from .wiring import get_ai


def handle_run(payload: AiRunV1, job: JobContext) -> dict[str, Any]:
    return run_task(payload, job, get_ai())


#: By job declaration; `app` binds them to the worker's broker (importing this boots nothing).
HANDLERS: dict[JobSpec[Any], Handler[Any]] = {
    catalog.AI_RUN: handle_run,
}

#: Bind them to a broker (default: the process's global one): `app`, or a test's own.
bind = partial(bind_handlers, HANDLERS)
