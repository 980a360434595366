"""The test kit for a product's own tests: sends captured without Redis or Postgres.

Enable the fixture with `pytest_plugins = ["shared.testing.plugin"]`, or use `JobCapture`
directly (`with JobCapture().installed() as jobs: ...`). The functions below act on the capture
installed now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..jobs.spec import JobSpec
from ..runtime import installed_runtime
from .capture import CaptureRuntime, Handler, JobCapture, NotAvailableInCapture, SentJob
from .session import RecordingSession, Statement


def _current() -> JobCapture:
    runtime = installed_runtime()
    if not isinstance(runtime, CaptureRuntime):
        raise RuntimeError("no jobfleet capture is installed: use the `jobfleet` fixture")
    return runtime.capture


def sent_jobs(spec: JobSpec[Any] | str | None = None) -> list[SentJob]:
    return _current().sent_jobs(spec)


def assert_sent(spec: JobSpec[Any] | str, **fields: Any) -> SentJob:
    return _current().assert_sent(spec, **fields)


def assert_not_sent(spec: JobSpec[Any] | str, **fields: Any) -> None:
    _current().assert_not_sent(spec, **fields)


def drain(
    handlers: Mapping[JobSpec[Any] | str, Handler] | None = None, **options: Any
) -> list[SentJob]:
    return _current().drain(handlers, **options)


__all__ = [
    "CaptureRuntime",
    "JobCapture",
    "NotAvailableInCapture",
    "RecordingSession",
    "SentJob",
    "Statement",
    "assert_not_sent",
    "assert_sent",
    "drain",
    "sent_jobs",
]
