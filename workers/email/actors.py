"""Actors of the email worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import dramatiq

from shared.contracts.email import EmailSendV1, EmailSeqRunDueV1
from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import BoundJob, handler

from . import app as _app  # noqa: F401  (the worker's broker: boots before the handlers bind)
from .delivery import deliver
from .due import run_due
from .wiring import get_mailer


def handle_send(payload: EmailSendV1, job: JobContext) -> dict[str, Any]:
    return deliver(payload, job, get_mailer())


def handle_run_due(payload: EmailSeqRunDueV1, job: JobContext) -> dict[str, Any]:
    m = get_mailer()
    stats = run_due(m.pool.connection, m.send_job, now=m.clock(), batch=m.settings.run_due_batch)
    return asdict(stats)


def bind(broker: dramatiq.Broker | None = None) -> dict[str, BoundJob[Any]]:
    """Bind the handlers to `broker` (default: the process's global broker); tests bind their own."""
    return {
        catalog.EMAIL_SEND.name: handler(catalog.EMAIL_SEND, broker=broker)(handle_send),
        catalog.EMAIL_SEQ_RUN_DUE.name: handler(catalog.EMAIL_SEQ_RUN_DUE, broker=broker)(
            handle_run_due
        ),
    }


_bound = bind()
#: `send_email.send(payload)`: the producer path (DESIGN §2), same as `catalog.EMAIL_SEND.send`.
send_email = _bound[catalog.EMAIL_SEND.name]
run_due_emails = _bound[catalog.EMAIL_SEQ_RUN_DUE.name]
