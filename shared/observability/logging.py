"""structlog JSON logs; the standard library (Dramatiq, SQLAlchemy) goes through it too.

Job fields (`job_name`, `job_id`, `message_id`, `org_id`, `attempt`, `request_id`) are bound as
contextvars by `middleware.log_context` for the time a job runs, so every line carries them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog

#: Payload keys whose values never reach a log line.
SECRET_KEYS = frozenset(
    {"password", "secret", "token", "private_key", "api_key", "authorization", "otp", "code"}
)


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "***" if str(k).lower() in SECRET_KEYS else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _redact_processor(_: Any, __: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    return redact(dict(event))  # type: ignore[no-any-return]


def configure_logging(
    *, level: str = "INFO", fmt: str = "json", process: str | None = None
) -> None:
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact_processor,
    ]
    if process:
        structlog.contextvars.bind_contextvars(process=process)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        # Drop events below the level before any processor runs (the hot path logs at INFO).
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
