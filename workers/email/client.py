"""The email domain's producer API: schedule an email in the caller's transaction.

    from workers.email.client import schedule_email

    with sessions() as session, session.begin():
        email = schedule_email(session, org_id=org, template_key="welcome",
                               recipient_email="ada@example.com", variables={"NAME": "Ada"})

The request is checked before anything is written: the `email:send` contract (address, template
key shape, no CR/LF), then the template itself, rendered once with the given variables (an
unknown template, a missing variable or a variable that puts CR/LF into the subject raises
`PayloadError` naming the field). Then the `scheduled_emails` row (id generated here) and, for
an email due now, its `email:send` job (the outbox by default) go into the caller's transaction.
An email due later stays SCHEDULED; the due sweep (`email-seq:run_due`) sends it then.

A product also mounts the feedback router (`feedback_router()`: one-click unsubscribe, tracking,
SES events) and may read the email settings (`email_settings()`).

Importing this module boots nothing (no broker, no logging, no runtime).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import text

from shared import outbox
from shared.errors import PayloadError
from shared.jobs import catalog
from workers.email.contracts import EmailSendV1

from .sequence_requests import (
    SequenceStep,
    StartedSequence,
    sequence_status,
    start_sequence,
    stop_sequence,
)
from .settings import EmailSettings, email_settings

if TYPE_CHECKING:
    from fastapi import APIRouter
    from sqlalchemy.orm import Session

    from shared.runtime import Runtime

    from .templates import Templates

Via = outbox.Via

INSERT = text(
    "INSERT INTO scheduled_emails (id, org_id, template_key, lang, recipient_email,"
    " recipient_name, variables, reply_to, status, send_at)"
    " VALUES (:id, :org_id, :template_key, :lang, :recipient_email, :recipient_name,"
    " CAST(:variables AS jsonb), :reply_to, :status, :send_at)"
)


@dataclass(frozen=True)
class ScheduledEmail:
    email_id: UUID
    #: The `email:send` job id; None while the email waits for its `send_at`.
    job_id: str | None
    status: str  # QUEUED (job staged) or SCHEDULED (sent by the due sweep at send_at)


@cache
def _templates() -> Templates:
    from .templates import Templates

    return Templates()


def template_keys() -> list[str]:
    """Template keys available in every language."""
    return _templates().keys()


def template_variables(template_key: str) -> list[str]:
    """The variables a template uses in any language and part (besides the built-ins PRODUCT,
    LANG and SUBJECT): what `variables` must hold."""
    import jinja2.meta

    from .templates import LANGS, TEMPLATE_DIR

    env = _templates().env
    names: set[str] = set()
    for lang in LANGS:
        for part in ("subject.txt", "txt", "html"):
            path = TEMPLATE_DIR / lang / f"{template_key}.{part}"
            if path.exists():
                names |= jinja2.meta.find_undeclared_variables(env.parse(path.read_text()))
    return sorted(names - {"PRODUCT", "LANG", "SUBJECT"})


def check_template(template_key: str, lang: str, variables: Mapping[str, Any]) -> None:
    """Render the template once: `PayloadError` if the worker could not render it."""
    from .templates import HeaderInjection, MissingVariable, UnknownTemplate

    try:
        _templates().render(template_key, lang, variables)
    except UnknownTemplate:
        known = ", ".join(template_keys())
        raise PayloadError(
            catalog.EMAIL_SEND.name,
            [{"loc": ("template_key",), "msg": f"no template {template_key!r} (known: {known})"}],
        ) from None
    except (MissingVariable, HeaderInjection) as exc:
        raise PayloadError(
            catalog.EMAIL_SEND.name, [{"loc": ("variables",), "msg": str(exc)}]
        ) from None


def schedule_email(
    session: Session,
    *,
    org_id: UUID,
    template_key: str,
    recipient_email: str,
    variables: Mapping[str, Any] | None = None,
    lang: str = "en",
    recipient_name: str | None = None,
    reply_to: str | None = None,
    send_at: datetime | None = None,
    now: datetime | None = None,
    via: Via = "outbox",
    request_id: str | None = None,
) -> ScheduledEmail:
    """Validate, insert the `scheduled_emails` row and stage `email:send` in `session`'s
    transaction (the caller commits). `via="send"` also publishes it from this process right
    after the commit, without waiting for the relay; either way nothing is published before the
    commit and a rollback drops it."""
    email_id = uuid.uuid4()
    payload = catalog.EMAIL_SEND.build(
        {
            "org_id": org_id,
            "entity_id": email_id,
            "template_key": template_key,
            "recipient_email": recipient_email,
            "recipient_name": recipient_name,
            "variables": dict(variables or {}),
            "reply_to": reply_to,
            "lang": lang,
        }
    )
    check_template(payload.template_key, payload.lang, payload.variables)
    now = now or datetime.now(UTC)
    due_now = send_at is None or send_at <= now
    status = "QUEUED" if due_now else "SCHEDULED"
    session.execute(INSERT, _row(payload, status, send_at or now))
    if not due_now:
        return ScheduledEmail(email_id, None, status)
    job_id = outbox.stage(session, catalog.EMAIL_SEND, payload, via=via, request_id=request_id)
    return ScheduledEmail(email_id, job_id, status)


def _row(payload: EmailSendV1, status: str, send_at: datetime) -> dict[str, Any]:
    return {
        "id": payload.entity_id,
        "org_id": payload.org_id,
        "template_key": payload.template_key,
        "lang": payload.lang,
        "recipient_email": payload.recipient_email,
        "recipient_name": payload.recipient_name,
        "variables": json.dumps(payload.variables),
        "reply_to": payload.reply_to,
        "status": status,
        "send_at": send_at,
    }


def feedback_router(runtime: Callable[[], Runtime] | None = None, **options: Any) -> APIRouter:
    """The email feedback router a product mounts outside its own auth (feedback/router.py;
    `runtime`: default the process's); FastAPI is imported only now."""
    from .feedback.router import feedback_router as build

    return build(runtime, **options) if runtime is not None else build(**options)


__all__ = [
    "EmailSettings",
    "ScheduledEmail",
    "SequenceStep",
    "StartedSequence",
    "check_template",
    "email_settings",
    "feedback_router",
    "schedule_email",
    "sequence_status",
    "start_sequence",
    "stop_sequence",
    "template_keys",
    "template_variables",
]
