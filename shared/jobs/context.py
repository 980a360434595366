"""What a running handler knows about its job, and the request id that travels with a send."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ..errors import JobCanceled, LeaseLost

#: Set by the product API per request; `send` copies it into the message and `job_runs`.
request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jobfleet_request_id", default=None
)


@contextmanager
def request_context(request_id: str) -> Iterator[None]:
    token = request_id_var.set(request_id)
    try:
        yield
    finally:
        request_id_var.reset(token)


ProgressWriter = Callable[[str, int, int, Any], bool | None]


@dataclass
class JobContext:
    """Handed to every handler with its payload."""

    job_id: str
    job_name: str
    queue: str
    org_id: UUID
    attempt: int
    max_attempts: int
    message_id: str
    request_id: str | None = None
    #: What the previous attempt saved with `save_checkpoint` (None on a first attempt).
    checkpoint: Any = None
    #: An operator asked to cancel while an earlier delivery was running.
    cancel_requested: bool = False
    #: What the handler returned (stored on the run by the tracking middleware).
    result: Any = None
    _write_progress: ProgressWriter | None = field(default=None, repr=False)
    #: The payload as the tracking middleware parsed (and upgraded) it, so the handler's
    #: wrapper does not parse it twice.
    parsed: Any = field(default=None, repr=False)
    #: This worker no longer holds the run's lease (see `LeaseLost`).
    lease_lost: bool = False

    def progress(self, done: int, total: int, *, checkpoint: Any = None) -> None:
        """Report `{done, total}` (and a checkpoint); raises `JobCanceled` when cancel was asked."""
        if self._write_progress is None:
            return
        canceled = (
            None if self.lease_lost else self._write_progress(self.job_id, done, total, checkpoint)
        )
        if canceled is None:
            self.lease_lost = True
            raise LeaseLost(
                f"{self.job_id}: another execution took this run over (this worker stalled "
                "past its lease); this one stops here and records nothing"
            )
        if canceled:
            raise JobCanceled(f"{self.job_id} canceled at {done}/{total}")
        if checkpoint is not None:
            self.checkpoint = checkpoint

    def save_checkpoint(self, checkpoint: Any, *, done: int = 0, total: int = 0) -> None:
        self.progress(done, total, checkpoint=checkpoint)


_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "jobfleet_job", default=None
)


def current_job() -> JobContext | None:
    return _current.get()


def set_current_job(ctx: JobContext | None) -> contextvars.Token[JobContext | None]:
    return _current.set(ctx)
