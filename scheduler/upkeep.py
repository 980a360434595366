"""The run store's maintenance and the recovery of lost messages: the scheduler's minute jobs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog

from shared import maintenance, run_stats
from shared.runtime import Runtime

log = structlog.get_logger("jobfleet.scheduler")


@dataclass(frozen=True)
class Upkeep:
    purged: int
    partitions_dropped: list[str]
    dead_by_queue: dict[str, int]
    over_threshold: list[str]
    redelivered: list[str]
    recovered: list[str]


def maintain(runtime: Runtime, now: datetime) -> Upkeep:
    """Partitions ahead and retention, DLQ size alert, stuck-run redelivery, lost-message
    recovery."""
    settings = runtime.settings
    maintenance.ensure_partitions(runtime)
    dropped = maintenance.drop_expired_partitions(runtime, now=now)
    purged = maintenance.purge_finished(runtime, now=now)
    report = maintenance.dlq_report(runtime, threshold=settings.maintenance_dlq_threshold)
    redelivered = maintenance.redeliver_stuck(
        runtime, now=now, grace_s=settings.maintenance_stuck_grace_s
    )
    recovered = maintenance.recover_lost(runtime, now=now)
    return Upkeep(
        purged, dropped, report.dead_by_queue, report.over_threshold, redelivered, recovered
    )


def recover(runtime: Runtime, now: datetime) -> maintenance.Recovery:
    """Every few seconds: what Redis lost (its data, a dead worker's running job) is enqueued
    again at once, not at the next full maintenance."""
    return maintenance.recover(runtime, now=now)


def roll_up_stats(runtime: Runtime, now: datetime) -> int:
    """The runs finished in the whole minutes since the last pass, rolled up for the console's
    charts (`shared/run_stats.py`)."""
    return run_stats.roll_up(runtime, now=now)
