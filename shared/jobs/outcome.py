"""What happens to a run after an attempt: a pure function of the attempt and its exception."""

from __future__ import annotations

import json
import os
import random
import sys
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from dramatiq.errors import ActorNotFound
from dramatiq.middleware.time_limit import TimeLimitExceeded

from ..config import RetryPolicy
from ..errors import (
    AlreadyDone,
    FleetError,
    JobCanceled,
    PermanentError,
    RetryLater,
)
from ..observability.logging import redact_text

#: Longest error text kept on a run (message + the tail of the traceback).
ERROR_MAX_CHARS = 4_000


@dataclass(frozen=True)
class Outcome:
    status: str  # COMPLETED | FAILED | DEAD | CANCELED | QUEUED
    result: Any = None
    error_code: str | None = None
    error: str | None = None
    #: Enqueue the message again after this many ms (FAILED: retry; QUEUED: not an attempt).
    requeue_delay_ms: int | None = None
    next_attempt: int | None = None

    def next_retry_at(self, now: datetime) -> datetime | None:
        if self.requeue_delay_ms is None:
            return None
        return now + timedelta(milliseconds=self.requeue_delay_ms)


def backoff_ms(policy: RetryPolicy, attempt: int, rng: random.Random) -> int:
    """Exponential from `min_backoff_ms` (attempt 1 → min), +0–25 % jitter, capped."""
    base = min(policy.max_backoff_ms, policy.min_backoff_ms * 2 ** max(0, attempt - 1))
    return int(min(policy.max_backoff_ms, base + rng.uniform(0, base * 0.25)))


def decide(
    *,
    attempt: int,
    policy: RetryPolicy,
    result: Any = None,
    exception: BaseException | None = None,
    rng: random.Random,
    result_max_bytes: int = 8_192,
) -> Outcome:
    if exception is None:
        return Outcome("COMPLETED", result=_small(result, result_max_bytes))
    if isinstance(exception, AlreadyDone):
        return Outcome("COMPLETED", result={"already_done": str(exception)})
    if isinstance(exception, RetryLater):
        return Outcome(
            "QUEUED",
            error_code=exception.code,
            error=str(exception),
            requeue_delay_ms=exception.delay_ms,
            next_attempt=attempt,
        )
    if isinstance(exception, JobCanceled):
        return Outcome("CANCELED", error_code=exception.code, error=str(exception))
    if isinstance(exception, PermanentError):
        return Outcome("DEAD", error_code=exception.code, error=describe(exception))
    if isinstance(exception, ActorNotFound):
        return Outcome("DEAD", error_code="UNKNOWN_JOB", error=f"no handler for {exception}")
    code = _code(exception)
    if attempt >= policy.max_attempts:
        return Outcome(
            "DEAD",
            error_code=code,
            error=f"attempts exhausted ({attempt}/{policy.max_attempts}): {describe(exception)}",
        )
    return Outcome(
        "FAILED",
        error_code=code,
        error=describe(exception),
        requeue_delay_ms=backoff_ms(policy, attempt, rng),
        next_attempt=attempt + 1,
    )


def _code(exception: BaseException) -> str:
    """A fleet error's own code (a domain's `code`), TIMEOUT, else the exception's class name."""
    if isinstance(exception, TimeLimitExceeded):
        return "TIMEOUT"
    if isinstance(exception, FleetError):
        return exception.code
    return type(exception).__name__.upper()


def describe(exception: BaseException) -> str:
    """`Type: message` and the last frames: enough to explain a failure, bounded in size.

    A permanent failure (a payload refused by its contract, a job's own verdict such as a
    domain's "no such entity") gets no frames: its message says what is wrong, where the check
    ran explains nothing, and the run's error column is read by operators. Frames name files relative to the project or
    to site-packages: a run's error is shown to operators and never carries install paths,
    nor the tokens of the URLs its message quotes (`redact_text`).
    """
    head = redact_text(f"{type(exception).__name__}: {exception}")
    if isinstance(exception, PermanentError):
        return head[:ERROR_MAX_CHARS]
    frames = traceback.extract_tb(exception.__traceback__)[-3:]
    lines = [
        f'  File "{where(frame.filename)}", line {frame.lineno}, in {frame.name}\n'
        + (f"    {frame.line.strip()}\n" if frame.line else "")
        for frame in frames
    ]
    text = head + ("\n" + "".join(lines) if lines else "")
    return text[:ERROR_MAX_CHARS]


_PROJECT = str(Path(__file__).resolve().parents[2]) + os.sep


def where(filename: str) -> str:
    """`filename` without the machine's install path: `dramatiq/worker.py`, `shared/jobs/x.py`."""
    for marker in (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}"):
        if marker in filename:
            return filename.rsplit(marker, 1)[1]
    if filename.startswith(_PROJECT):
        return filename[len(_PROJECT) :]
    if filename.startswith(sys.prefix) or filename.startswith(sys.base_prefix):
        return Path(filename).name
    return filename


def _small(result: Any, limit: int) -> Any:
    if result is None:
        return None
    try:
        encoded = json.dumps(result, default=str)
    except (TypeError, ValueError):
        return {"repr": repr(result)[:200]}
    if len(encoded) > limit:
        return {"truncated": True, "size": len(encoded)}
    return json.loads(encoded)
