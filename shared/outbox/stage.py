"""Staging a job in the caller's transaction: its outbox event and its STAGED run, one commit.
For example (two jobs of a product's own `billing` domain, say):

    with sessions() as session, session.begin():
        session.add(order)
        outbox.enqueue(session, catalog.INVOICE_SEND, payload)       # the relay publishes it
        outbox.enqueue(session, catalog.RECEIPT_PDF, other, at_commit=True)  # and so does this
                                                                     # process, after the commit

Both rows are written by the caller's own connection, so they commit or roll back with its
work: a rollback leaves no event, no run and no trace anywhere; from the commit on, the run
(STAGED until published, then QUEUED) answers `GET /jobs/{id}`, SSE, `fleet jobs show` and the
console. Nothing is published before the commit: a worker never runs a job whose rows (an
`exports` row, an order) its producer has not committed yet.

`at_commit=True` publishes the job from this process as soon as the transaction commits (an
SQLAlchemy `after_commit` hook), without waiting for the relay; when that fails (Redis down),
the relay publishes it later: either way once, under one job id.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import structlog
from sqlalchemy import event as sa_event
from sqlalchemy import text

from ..contracts.base import Payload
from ..db.models import OutboxEvent
from ..jobs.context import request_id_var
from ..jobs.priorities import Priority, check_priority
from ..jobs.spec import JobSpec
from ..runtime import get_runtime, installed_runtime

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from ..jobs.handler import BoundJob  # not at run time: a producer loads no Dramatiq

log = structlog.get_logger("jobfleet.outbox")

CHANNEL = "jobfleet_outbox"
NOTIFY = text("SELECT pg_notify(:channel, '')")
#: The run, in the caller's transaction (the statement is shared with the Node.js kit).
STAGE_RUN = text(Path(__file__).with_name("stage_run.sql").read_text())
#: `session.info` key: the events this transaction staged with `at_commit=True`.
_AT_COMMIT = "jobfleet.outbox.at_commit"


def deliver_at(
    scheduled_at: datetime | None, delay_ms: int | None, *, now: datetime | None = None
) -> datetime | None:
    """When a staged job is due: `scheduled_at` (aware) or now + `delay_ms`; None: at once."""
    if scheduled_at is not None and delay_ms is not None:
        raise ValueError("give scheduled_at or delay_ms, not both")
    if scheduled_at is not None:
        if scheduled_at.tzinfo is None:
            raise ValueError("scheduled_at must be timezone-aware (e.g. datetime.now(UTC))")
        return scheduled_at
    if delay_ms is not None:
        if delay_ms < 0:
            raise ValueError("delay_ms must not be negative")
        return (now or datetime.now(UTC)) + timedelta(milliseconds=delay_ms)
    return None


def enqueue(
    session: Session,
    job: JobSpec[Any] | BoundJob[Any],
    payload: Payload | Mapping[str, Any],
    *,
    event_type: str | None = None,
    request_id: str | None = None,
    scheduled_at: datetime | None = None,
    delay_ms: int | None = None,
    at_commit: bool = False,
    priority: Priority | None = None,
) -> OutboxEvent:
    """Validate now (a `PayloadError` raises in the caller's request), then stage the job's
    event and run in `session`'s transaction. `scheduled_at` / `delay_ms`: not before then.
    `at_commit`: also publish it from this process right after the commit; then Redis must
    answer now (`BrokerUnavailable` before anything is written, as a direct send). `priority`:
    the job's priority in its queue (default: the job's own; `UnknownPriority` otherwise)."""
    spec = job if isinstance(job, JobSpec) else job.spec  # a `BoundJob` carries its declaration
    if priority is not None:
        check_priority(priority)
    model, wire = spec.contract.build_wire(payload)
    due = deliver_at(scheduled_at, delay_ms)
    event = OutboxEvent(
        id=uuid.uuid4(),
        org_id=model.org_id,
        type=event_type or spec.name,
        job_name=spec.name,
        job_id=spec.job_id(model, wire),
        payload=wire,
        request_id=request_id or request_id_var.get(),
        status="PENDING",
        attempts=0,
        deliver_at=due,
        priority=priority,
    )
    runtime = installed_runtime()
    if runtime is not None and runtime.captures_sends:  # the test kit records it at the commit
        runtime.sender.stage(  # type: ignore[attr-defined]
            session,
            spec,
            model,
            request_id=event.request_id,
            delay_ms=_delay_ms(due),
            via="send" if at_commit else "outbox",
        )
        return event
    if spec.requires is not None:  # in the caller's transaction: its own new row counts
        found = session.execute(
            text(spec.requires.sql(named=True)),
            spec.requires.params(model),
        ).first()
        if found is None:
            raise spec.requires.missing(spec.name, model)
    if at_commit:
        runtime = runtime or get_runtime()
        runtime.sender.check_broker(event.job_id, spec.queue)
    session.add(event)
    session.execute(
        STAGE_RUN,
        {
            "o": model.org_id,
            "n": spec.name,
            "j": event.job_id,
            "q": spec.queue,
            "et": spec.entity_type,
            "e": spec.entity_id(model) or None,
            "p": json.dumps(wire),
            "r": event.request_id,
        },
    )
    session.execute(NOTIFY, {"channel": CHANNEL})
    if at_commit:
        _publish_after_commit(session, event.id)
    return event


def _delay_ms(due: datetime | None) -> int | None:
    if due is None:
        return None
    return max(0, int((due - datetime.now(UTC)).total_seconds() * 1000))


def _publish_after_commit(session: Session, event_id: uuid.UUID) -> None:
    pending: list[uuid.UUID] | None = session.info.get(_AT_COMMIT)
    if pending is None:
        pending = session.info[_AT_COMMIT] = []
        if not sa_event.contains(session, "after_commit", _after_commit):
            sa_event.listen(session, "after_commit", _after_commit)
            sa_event.listen(session, "after_rollback", _after_rollback)
    pending.append(event_id)


def _after_commit(session: Session) -> None:
    """Publish this transaction's `at_commit` events now. Never raises: the commit is done,
    and an event not published here stays PENDING for the relay."""
    event_ids = session.info.pop(_AT_COMMIT, None)
    if not event_ids:
        return
    from .relay import relay_once

    try:
        stats = relay_once(get_runtime(), now=datetime.now(UTC), event_ids=event_ids)
    except Exception as exc:  # the relay publishes them later
        log.warning("outbox.publish_deferred", events=len(event_ids), error=str(exc))
        return
    if stats.retried or stats.failed:
        log.warning("outbox.publish_deferred", events=len(event_ids), **stats.__dict__)


def _after_rollback(session: Session) -> None:
    session.info.pop(_AT_COMMIT, None)


Via = Literal["outbox", "send"]


def stage(
    session: Session,
    job: JobSpec[Any] | BoundJob[Any],
    payload: Payload | Mapping[str, Any],
    *,
    via: Via = "outbox",
    request_id: str | None = None,
    scheduled_at: datetime | None = None,
    delay_ms: int | None = None,
    priority: Priority | None = None,
) -> str:
    """The domain clients' staging: `via="outbox"` leaves the publication to the relay (within
    a second of the commit); `via="send"` also publishes from this process right after the
    commit. Either way the job is held until the commit and dropped on rollback. Its job id."""
    if via not in ("outbox", "send"):
        raise ValueError(f"via must be 'outbox' or 'send', not {via!r}")
    return enqueue(
        session,
        job,
        payload,
        request_id=request_id,
        scheduled_at=scheduled_at,
        delay_ms=delay_ms,
        at_commit=via == "send",
        priority=priority,
    ).job_id
