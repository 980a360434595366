"""How a job travels in a Dramatiq message: the payload as the only argument, the tracking
fields as options (so a worker can record a run even when its producer's row is missing)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import dramatiq

from ..broker import delivery_of, is_delivery
from ..contracts.base import SYSTEM_ORG


def build_message(
    *,
    job_name: str,
    queue: str,
    payload: dict[str, Any],
    job_id: str,
    org_id: UUID | str,
    entity_type: str | None,
    entity_id: str | None,
    request_id: str | None,
    attempt: int = 1,
    priority: str = "default",
) -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name=queue,
        actor_name=job_name,
        args=(payload,),
        kwargs={},
        options={
            "job_id": job_id,
            "org_id": str(org_id),
            "entity_type": entity_type,
            "entity_id": entity_id,
            "request_id": request_id,
            "attempt": attempt,
            "sent_at": time.time(),
            # Its lane with `org_id` (shared/broker/lanes.py); read again by a retry's enqueue.
            "priority": priority,
        },
    )


@dataclass(frozen=True)
class MessageInfo:
    """The tracking fields of a received message, with safe fallbacks for raw messages."""

    job_id: str
    job_name: str
    queue: str
    org_id: UUID
    attempt: int
    message_id: str
    request_id: str | None
    entity_type: str | None
    entity_id: str | None
    payload: Any
    sent_at: float | None


def message_info(message: dramatiq.Message[Any] | Any) -> MessageInfo:
    """The tracking fields of a received message (computed once per delivery, then kept on
    its `Delivery` for the next middleware)."""
    if not is_delivery(message):  # a shared Message: nothing is kept on it
        return _message_info(message)
    state = delivery_of(message)
    if state.info is None:
        state.info = _message_info(message)
    return state.info


def _message_info(message: dramatiq.Message[Any] | Any) -> MessageInfo:
    options = message.options
    payload = (
        message.args[0]
        if len(message.args) == 1 and not message.kwargs
        else {
            "args": list(message.args),
            "kwargs": dict(message.kwargs),
        }
    )
    queue = message.queue_name.removesuffix(".DQ")
    org = _uuid(options.get("org_id")) or _uuid(_get(payload, "org_id")) or SYSTEM_ORG
    # A message that bypassed `send` has no job id: key it by its message id so it is still
    # recorded (and visible in the DLQ) rather than dropped.
    job_id = options.get("job_id") or f"raw:{message.actor_name}:{message.message_id}"
    attempt = options.get("attempt")
    return MessageInfo(
        job_id=str(job_id),
        job_name=message.actor_name,
        queue=queue,
        org_id=org,
        attempt=attempt if isinstance(attempt, int) and attempt >= 1 else 1,
        message_id=message.message_id,
        request_id=options.get("request_id"),
        entity_type=options.get("entity_type"),
        entity_id=options.get("entity_id") or _get(payload, "entity_id"),
        payload=payload,
        sent_at=options.get("sent_at"),
    )


def _get(payload: Any, key: str) -> Any:
    return payload.get(key) if isinstance(payload, dict) else None


def _uuid(value: Any) -> UUID | None:
    try:
        return UUID(str(value)) if value is not None else None
    except ValueError:
        return None
