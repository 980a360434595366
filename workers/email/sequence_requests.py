"""Email sequences for a product: start one, stop one, read its status, in the caller's own
SQLAlchemy transaction (docs/producers.md, "Email sequences").

    from workers.email.client import SequenceStep, start_sequence

    with sessions() as session, session.begin():
        started = start_sequence(
            session, org_id=org, name="onboarding", recipient_email="ada@example.com",
            steps=[SequenceStep("welcome"), SequenceStep("quote-reminder", delay_s=86_400)],
            variables={"NAME": "Ada", ...},
        )

Every step's template is rendered once with the sequence's variables before anything is
written (`PayloadError` naming the step and field). The sequence and its first step (a
SCHEDULED `scheduled_emails` row, due `steps[0].delay_s` from now) commit with the caller's
transaction; the due sweep (`email-seq:run_due`, every minute under the scheduler) sends each
step when it is due, and each step is scheduled when the one before it was sent
(`sequences.py`). An address that unsubscribed or bounced before never starts a sequence (it is
STOPPED at once, with the reason).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn, cast
from uuid import UUID

from sqlalchemy import text

from shared.errors import PayloadError
from shared.jobs import catalog

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult
    from sqlalchemy.orm import Session

#: Why a product stopped a sequence (`email_sequences.stop_reason`).
STOPPED_BY_PRODUCT = "STOPPED_BY_PRODUCT"

INSERT_SEQUENCE = text(
    "INSERT INTO email_sequences (id, org_id, name, recipient_email, recipient_name, lang,"
    " variables, reply_to, steps) VALUES (:id, :org_id, :name, :recipient_email,"
    " :recipient_name, :lang, CAST(:variables AS jsonb), :reply_to, CAST(:steps AS jsonb))"
)
INSERT_FIRST_STEP = text(
    "INSERT INTO scheduled_emails (id, org_id, template_key, lang, recipient_email,"
    " recipient_name, variables, reply_to, status, send_at, sequence_id, sequence_step)"
    " VALUES (:id, :org_id, :template_key, :lang, :recipient_email, :recipient_name,"
    " CAST(:variables AS jsonb), :reply_to, 'SCHEDULED', :send_at, :sequence_id, 0)"
)
SUPPRESSED = text(
    "SELECT reason FROM email_suppressions WHERE org_id = :org_id"
    " AND lower(email) = lower(:email) LIMIT 1"
)
STOP = text(
    "UPDATE email_sequences SET status = 'STOPPED', stop_reason = :reason, updated_at = :now"
    " WHERE id = :id AND org_id = :org_id AND status = 'ACTIVE'"
)
CANCEL_PENDING = text(
    "UPDATE scheduled_emails SET status = 'CANCELED', error_code = :code, updated_at = :now"
    " WHERE sequence_id = :id AND org_id = :org_id AND status = 'SCHEDULED'"
)
STATUS = text(
    "SELECT s.id, s.name, s.status, s.current_step, s.steps, s.stop_reason, s.recipient_email,"
    " (SELECT min(e.send_at) FROM scheduled_emails e WHERE e.sequence_id = s.id"
    "   AND e.status = 'SCHEDULED') AS next_send_at"
    " FROM email_sequences s WHERE s.id = :id AND s.org_id = :org_id"
)


@dataclass(frozen=True)
class SequenceStep:
    """One step: its template, sent `delay_s` after the previous step was sent (the first:
    after the start)."""

    template_key: str
    delay_s: int = 0


@dataclass(frozen=True)
class StartedSequence:
    sequence_id: UUID
    #: The first step's `scheduled_emails` row.
    first_email_id: UUID
    first_send_at: datetime
    #: ACTIVE, or STOPPED at once for an address that unsubscribed or bounced before.
    status: str
    stop_reason: str | None = None


def start_sequence(
    session: Session,
    *,
    org_id: UUID,
    name: str,
    recipient_email: str,
    steps: Sequence[SequenceStep | Mapping[str, Any]],
    variables: Mapping[str, Any] | None = None,
    lang: str = "en",
    recipient_name: str | None = None,
    reply_to: str | None = None,
    now: datetime | None = None,
) -> StartedSequence:
    """Check every step, then write the sequence and its first step in `session`'s
    transaction (the caller commits)."""
    from .client import check_template

    checked = _steps(steps)
    if not name or len(name) > 100:
        _refuse(("name",), "a name of 1 to 100 characters")
    variables = dict(variables or {})
    # The address, name and reply-to are checked by the email:send contract, as each step's
    # job will be; the templates are rendered once, as the worker will render them.
    catalog.EMAIL_SEND.build(
        {
            "org_id": org_id,
            "entity_id": uuid.uuid4(),
            "template_key": checked[0].template_key,
            "recipient_email": recipient_email,
            "recipient_name": recipient_name,
            "variables": variables,
            "reply_to": reply_to,
            "lang": lang,
        }
    )
    for index, step in enumerate(checked):
        try:
            check_template(step.template_key, lang, variables)
        except PayloadError as exc:
            raise PayloadError(
                catalog.EMAIL_SEND.name,
                [{**e, "loc": ("steps", index, *e["loc"])} for e in exc.errors],
            ) from None
    now = now or datetime.now(UTC)
    sequence_id, email_id = uuid.uuid4(), uuid.uuid4()
    first_send_at = now + timedelta(seconds=checked[0].delay_s)
    common = {
        "org_id": org_id,
        "recipient_email": recipient_email,
        "recipient_name": recipient_name,
        "lang": lang,
        "variables": json.dumps(variables),
        "reply_to": reply_to,
    }
    session.execute(
        INSERT_SEQUENCE,
        {
            **common,
            "id": sequence_id,
            "name": name,
            "steps": json.dumps(
                [{"template_key": s.template_key, "delay_s": s.delay_s} for s in checked]
            ),
        },
    )
    session.execute(
        INSERT_FIRST_STEP,
        {
            **common,
            "id": email_id,
            "template_key": checked[0].template_key,
            "send_at": first_send_at,
            "sequence_id": sequence_id,
        },
    )
    suppressed = session.execute(SUPPRESSED, {"org_id": org_id, "email": recipient_email}).first()
    if suppressed is not None:  # an address that opted out earlier never starts a sequence
        reason = str(suppressed[0])
        _stop(session, org_id, sequence_id, reason, now)
        return StartedSequence(sequence_id, email_id, first_send_at, "STOPPED", reason)
    return StartedSequence(sequence_id, email_id, first_send_at, "ACTIVE")


def stop_sequence(
    session: Session, *, org_id: UUID, sequence_id: UUID, now: datetime | None = None
) -> bool:
    """Stop an ACTIVE sequence of `org_id` and cancel its pending step (False: no such active
    sequence). A step already being sent is not recalled."""
    return _stop(session, org_id, sequence_id, STOPPED_BY_PRODUCT, now or datetime.now(UTC))


def sequence_status(session: Session, *, org_id: UUID, sequence_id: UUID) -> dict[str, Any] | None:
    """The sequence as a product shows it (None: no such sequence for this org)."""
    row = session.execute(STATUS, {"id": sequence_id, "org_id": org_id}).mappings().first()
    if row is None:
        return None
    return {
        "sequence_id": row["id"],
        "name": row["name"],
        "status": row["status"],
        "current_step": row["current_step"],
        "steps": len(row["steps"]),
        "stop_reason": row["stop_reason"],
        "recipient_email": row["recipient_email"],
        "next_send_at": row["next_send_at"],
    }


def _stop(session: Session, org_id: UUID, sequence_id: UUID, reason: str, now: datetime) -> bool:
    params = {"id": sequence_id, "org_id": org_id, "now": now}
    stopped = cast(
        "CursorResult[Any]", session.execute(STOP, {**params, "reason": reason})
    ).rowcount
    if stopped:
        session.execute(CANCEL_PENDING, {**params, "code": f"SEQUENCE_{reason}"})
    return bool(stopped)


def _steps(steps: Sequence[SequenceStep | Mapping[str, Any]]) -> list[SequenceStep]:
    if not steps:
        _refuse(("steps",), "a sequence needs at least one step")
    out: list[SequenceStep] = []
    for index, given in enumerate(steps):
        if isinstance(given, SequenceStep):
            step = given
        else:
            try:
                step = SequenceStep(str(given["template_key"]), int(given.get("delay_s", 0)))
            except (KeyError, TypeError, ValueError):
                _refuse(("steps", index), "a step is {template_key, delay_s}")
        if step.delay_s < 0:
            _refuse(("steps", index, "delay_s"), "must not be negative")
        out.append(step)
    return out


def _refuse(loc: tuple[Any, ...], msg: str) -> NoReturn:
    raise PayloadError(catalog.EMAIL_SEND.name, [{"loc": loc, "msg": msg}])
