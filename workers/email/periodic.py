"""The email domain's periodic job, which the scheduler runs (registration: `periodic`): once a
minute, `email-seq:run_due` enqueues every due scheduled email."""

from __future__ import annotations

from datetime import datetime

from shared.contracts import SYSTEM_ORG
from shared.jobs.send import SendResult
from shared.runtime import Runtime

from .jobs import EMAIL_SEQ_RUN_DUE
from .settings import email_settings


def slot(now: datetime) -> str:
    """The minute `now` falls in (`2026-11-29T22:41Z`): two triggers in one minute are one job."""
    return now.strftime("%Y-%m-%dT%H:%MZ")


def run_due(runtime: Runtime, now: datetime) -> SendResult:
    """Send `email-seq:run_due` for this minute (a duplicate when another replica already did)."""
    return runtime.sender.send(EMAIL_SEQ_RUN_DUE, {"org_id": SYSTEM_ORG, "slot": slot(now)})


def interval_s() -> float:
    return email_settings().due_interval_s
