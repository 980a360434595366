"""Keep prompts out of Dramatiq's own log lines in the ai worker process.

Dramatiq's worker thread logs a failed message with its full repr — `ai:run({... 'input':
'<the text to summarize>' ...})` — at INFO for expected failures and WARNING for the rest.
The input of an AI task is exactly what must not be logged unless `AI_LOG_CONTENT` is on, so
this filter rewrites those records to the actor name and message id. It sits on Dramatiq's
logger (not on a handler), so it survives `configure_logging` replacing the handlers.
"""

from __future__ import annotations

import logging
from typing import Any

#: The loggers of Dramatiq that put a message's repr (its arguments) into their records.
MESSAGE_LOGGERS = ("dramatiq.worker.WorkerThread", "dramatiq.worker.ConsumerThread")


class RedactMessages(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_redacted(a) for a in record.args)
        return True


def _redacted(value: Any) -> Any:
    # A dramatiq.Message (or MessageProxy): print what identifies it, never its arguments.
    actor = getattr(value, "actor_name", None)
    message_id = getattr(value, "message_id", None)
    if actor is not None and message_id is not None:
        return f"{actor}(message_id={message_id}, arguments redacted)"
    return value


def install(*, log_content: bool) -> None:
    """Once per process (idempotent); nothing to do when content may be logged."""
    if log_content:
        return
    for name in MESSAGE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactMessages) for f in logger.filters):
            logger.addFilter(RedactMessages())
