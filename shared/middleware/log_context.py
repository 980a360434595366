"""Binds the job's identity to every log line written while it runs (structlog contextvars)."""

from __future__ import annotations

from typing import Any

import dramatiq
import structlog
from dramatiq.middleware import Middleware

from ..jobs.message import message_info

_KEYS = ("job_name", "job_id", "message_id", "org_id", "attempt", "request_id")


class LogContext(Middleware):
    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        info = message_info(message)
        structlog.contextvars.bind_contextvars(
            job_name=info.job_name,
            job_id=info.job_id,
            message_id=info.message_id,
            org_id=str(info.org_id),
            attempt=info.attempt,
            request_id=info.request_id,
        )

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        structlog.contextvars.unbind_contextvars(*_KEYS)

    def after_skip_message(self, broker: dramatiq.Broker, message: Any) -> None:
        structlog.contextvars.unbind_contextvars(*_KEYS)
