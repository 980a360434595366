"""The ai domain's producer API: request an AI task in the caller's transaction.

    from workers.ai.client import request_ai_task

    with sessions() as session, session.begin():
        task = request_ai_task(session, org_id=org, task="summarize", input=text,
                               params={"max_words": 60})

The request is checked before anything is written (`PayloadError` naming the field): the
`ai:run` contract (task, input), then the task's own params and input rules (the same check the
worker makes: a JSON Schema for `extract`, unique labels for `classify`, 1 to 2,048 texts for
`embed`). Then the `ai_tasks` row (id generated here) and its `ai:run` job (the outbox by
default) go into the caller's transaction.

Importing this module boots nothing (no broker, no logging, no runtime, no model).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import text

from shared import outbox
from shared.errors import PayloadError, PermanentError
from shared.jobs import catalog
from workers.ai.contracts import AiRunV1

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

Via = outbox.Via

INSERT = text(
    "INSERT INTO ai_tasks (id, org_id, task, input, params)"
    " VALUES (:id, :org_id, :task, CAST(:input AS jsonb), CAST(:params AS jsonb))"
)


@dataclass(frozen=True)
class AiTaskRequest:
    task_id: UUID
    job_id: str


def check_task(payload: AiRunV1) -> None:
    """`PayloadError` for params or input the worker would refuse (`INVALID_PARAMS`)."""
    from .tasks import parse_params

    try:
        parse_params(payload.task, payload.params, payload.input)
    except PermanentError as exc:
        about_input = str(exc).split(": ", 1)[-1].startswith("input")
        loc = ("input",) if about_input else ("params",)
        raise PayloadError(catalog.AI_RUN.name, [{"loc": loc, "msg": str(exc)}]) from None


def request_ai_task(
    session: Session,
    *,
    org_id: UUID,
    task: str,
    input: str | list[str],
    params: Mapping[str, Any] | None = None,
    via: Via = "outbox",
    request_id: str | None = None,
) -> AiTaskRequest:
    """Validate, insert the `ai_tasks` row and stage `ai:run` in `session`'s transaction (the
    caller commits). `via="send"` also publishes it from this process right after the commit, without waiting for
    the relay; either way nothing is published before the commit and a rollback drops it."""
    task_id = uuid.uuid4()
    payload = catalog.AI_RUN.build(
        {
            "org_id": org_id,
            "entity_id": task_id,
            "task": task,
            "input": input,
            "params": dict(params or {}),
        }
    )
    check_task(payload)
    session.execute(
        INSERT,
        {
            "id": task_id,
            "org_id": org_id,
            "task": payload.task,
            "input": json.dumps(payload.input),
            "params": json.dumps(payload.params),
        },
    )
    job_id = outbox.stage(session, catalog.AI_RUN, payload, via=via, request_id=request_id)
    return AiTaskRequest(task_id, job_id)


def task_status(task_id: UUID, org_id: UUID) -> dict[str, Any] | None:
    """The task's status and result (None: no such task for this org)."""
    from shared.runtime import get_runtime

    from . import store

    with get_runtime().pool.connection() as conn:
        row = store.get(conn, task_id, org_id)
    if row is None:
        return None
    return {
        "task_id": row.id,
        "task": row.task,
        "status": row.status,
        "result": row.result,
        "error_code": row.error_code,
        "model": row.model,
        "tokens_in": row.tokens_in,
        "tokens_out": row.tokens_out,
    }


__all__ = ["AiTaskRequest", "check_task", "request_ai_task", "task_status"]
