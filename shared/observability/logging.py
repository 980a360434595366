"""structlog JSON logs; the standard library (Dramatiq, SQLAlchemy) goes through it too.

Job fields (`job_name`, `job_id`, `message_id`, `org_id`, `attempt`, `request_id`) are bound as
contextvars by `middleware.log_context` for the time a job runs, so every line carries them.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog

#: Payload keys whose values never reach a log line nor a view (CLI, API), at any level.
SECRET_KEYS = frozenset(
    {"password", "secret", "token", "private_key", "api_key", "authorization", "otp", "code"}
)
#: ... and keys ending so (e.g. `db_password`, `access_token`, `client_secret`).
SECRET_SUFFIXES = ("_password", "_secret", "_token", "_api_key", "_private_key")
MASK = "***"


def is_secret_key(key: Any) -> bool:
    name = str(key).lower()
    return name in SECRET_KEYS or name.endswith(SECRET_SUFFIXES)


def redact(value: Any) -> Any:
    """`value` with the values under secret keys masked, at any depth, and the secrets of the
    URLs inside its strings (`redact_text`)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: MASK if is_secret_key(k) else redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")
_PAIR = re.compile(r"([^&;=]*)=([^&;]*)")


def redact_text(text: str) -> str:
    """`text` with each URL's secrets masked: a reset link's token (`?t=***`, every query and
    fragment value: a token's key can be any name) and the password of `user:***@host` (a
    user alone, `https://token@host`, is masked whole)."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: mask_url(m.group(0)), text)


def mask_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    userinfo, at, host = parts.netloc.rpartition("@")
    netloc = parts.netloc
    if at:
        netloc = (
            f"{userinfo.split(':', 1)[0]}:{MASK}@{host}" if ":" in userinfo else f"{MASK}@{host}"
        )
    query = _PAIR.sub(rf"\1={MASK}", parts.query) if parts.query else ""
    if parts.query and "=" not in parts.query:
        query = MASK
    fragment = _PAIR.sub(rf"\1={MASK}", parts.fragment) if "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_processor(_: Any, __: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    return redact(dict(event))  # type: ignore[no-any-return]


#: Dramatiq loggers that put a message's repr (its payload) into their records.
MESSAGE_LOGGERS = ("dramatiq.worker.WorkerThread", "dramatiq.worker.ConsumerThread")


class RedactMessages(logging.Filter):
    """Dramatiq logs a failed message with its full repr (e.g. `queue:job({... 'recipient':
    ...})`): payloads (addresses, free text, file contents) must not reach the logs, so its records
    show the actor and message id instead. The job fields are on every line anyway (contextvars).
    It sits on Dramatiq's loggers, not on a handler, so it survives handler changes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_message_ref(a) for a in record.args)
        return True


def _message_ref(value: Any) -> Any:
    actor = getattr(value, "actor_name", None)
    message_id = getattr(value, "message_id", None)
    if actor is not None and message_id is not None:
        return f"{actor}(message_id={message_id}, arguments redacted)"
    return value


class RedactRecords(logging.Filter):
    """On the process's log handler: every record, whatever its logger and level, has its
    arguments redacted before it is formatted. Dramatiq's actor loggers print a message's
    arguments at DEBUG ("Received args=(...)"), and a library may log any structure: a
    message becomes a reference, the arguments of "Received args=" are dropped, and secret
    keys are masked in any dict or list argument."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Received args="):
            record.msg, record.args = "Received a message (arguments redacted).", ()
        elif isinstance(record.args, tuple) and record.args:
            record.args = tuple(_redact_arg(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = redact(record.args)
        return True


def _redact_arg(value: Any) -> Any:
    value = _message_ref(value)
    return redact(value) if isinstance(value, dict | list | tuple) else value


def redact_dramatiq_messages(*, enabled: bool = True) -> None:
    """Install (idempotent) or remove the payload filter on Dramatiq's loggers."""
    for name in MESSAGE_LOGGERS:
        logger = logging.getLogger(name)
        present = [f for f in logger.filters if isinstance(f, RedactMessages)]
        if enabled and not present:
            logger.addFilter(RedactMessages())
        for f in present if not enabled else ():
            logger.removeFilter(f)


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
    handler.addFilter(RedactRecords())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    redact_dramatiq_messages()
    for noisy in ("urllib3", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
