"""Actors of the email worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from typing import Any

from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import Handler, bind_handlers
from shared.jobs.spec import JobSpec
from workers.email.contracts import EmailSendV1, EmailSeqRunDueV1

from .delivery import deliver
from .due import run_due
from .wiring import get_mailer


def handle_send(payload: EmailSendV1, job: JobContext) -> dict[str, Any]:
    return deliver(payload, job, get_mailer())


def handle_run_due(payload: EmailSeqRunDueV1, job: JobContext) -> dict[str, Any]:
    m = get_mailer()
    stats = run_due(m.pool.connection, m.send_job, now=m.clock(), batch=m.settings.run_due_batch)
    return asdict(stats)


#: By job declaration; `app` binds them to the worker's broker (importing this boots nothing).
HANDLERS: dict[JobSpec[Any], Handler[Any]] = {
    catalog.EMAIL_SEND: handle_send,
    catalog.EMAIL_SEQ_RUN_DUE: handle_run_due,
}

#: Bind them to a broker (default: the process's global one): `app`, or a test's own.
bind = partial(bind_handlers, HANDLERS)
