"""Minute jobs of the scheduler: due email sequences and the run store's maintenance."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog

from shared import maintenance
from shared.contracts import SYSTEM_ORG
from shared.jobs import catalog
from shared.jobs.send import SendResult
from shared.runtime import Runtime

log = structlog.get_logger("jobfleet.scheduler")


def slot(now: datetime) -> str:
    """The minute `now` falls in (`2026-11-29T22:41Z`): two triggers in one minute are one job."""
    return now.strftime("%Y-%m-%dT%H:%MZ")


def run_due_emails(runtime: Runtime, now: datetime) -> SendResult:
    """Send `email-seq:run_due` for this minute (a duplicate when another replica already did)."""
    payload = {"org_id": SYSTEM_ORG, "slot": slot(now)}
    return runtime.sender.send(catalog.EMAIL_SEQ_RUN_DUE, payload)


@dataclass(frozen=True)
class Upkeep:
    purged: int
    dead_by_queue: dict[str, int]
    over_threshold: list[str]
    redelivered: list[str]
    recovered: list[str]


def maintain(runtime: Runtime, now: datetime) -> Upkeep:
    """Purge past retention, DLQ size alert, stuck-run redelivery, lost-message recovery."""
    settings = runtime.settings
    purged = maintenance.purge_finished(runtime, now=now)
    report = maintenance.dlq_report(runtime, threshold=settings.maintenance_dlq_threshold)
    redelivered = maintenance.redeliver_stuck(
        runtime, now=now, grace_s=settings.maintenance_stuck_grace_s
    )
    recovered = maintenance.recover_lost(runtime, now=now)
    return Upkeep(purged, report.dead_by_queue, report.over_threshold, redelivered, recovered)


def recover(runtime: Runtime, now: datetime) -> maintenance.Recovery:
    """Every few seconds: what Redis lost (its data, a dead worker's running job) is enqueued
    again at once, not at the next full maintenance."""
    return maintenance.recover(runtime, now=now)
