"""The scheduler's periodic jobs, as a table: name, what runs, how often (from settings). The
fleet's own (the outbox relay, the run store's maintenance, the recovery of lost messages) come
first, then those the domains register (`Domain.periodic`, shared/domains.py), in fleet order.

Every entry runs with `max_instances=1` and coalescing (see `process.py`); each function takes
the runtime and `now` (read once per run by the caller) so that time-driven logic is testable
without sleeping, and must be safe with two scheduler replicas running at once (the outbox relay
claims rows with `FOR UPDATE SKIP LOCKED`; see each entry for the others).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import structlog

from shared import maintenance, run_stats
from shared.domains import load_target, periodic_jobs
from shared.outbox import RelayStats, relay_once
from shared.runtime import Runtime

from . import upkeep
from .settings import scheduler_settings

log = structlog.get_logger("jobfleet.scheduler")


@dataclass(frozen=True)
class Periodic:
    name: str
    run: Callable[[Runtime, datetime], object]
    #: Seconds between two runs, read from the settings when the schedule is built.
    interval_s: Callable[[], float]


def relay_outbox(runtime: Runtime, now: datetime) -> RelayStats:
    """One relay pass: publish the due outbox events (at most `outbox_batch`)."""
    stats = relay_once(runtime, now=now)
    if stats.claimed:
        log.info("outbox.relayed", **stats.__dict__)
    return stats


def _registered() -> tuple[Periodic, ...]:
    return tuple(
        Periodic(job.name, load_target(job.run), load_target(job.interval))
        for job in periodic_jobs()
    )


SCHEDULE: tuple[Periodic, ...] = (
    Periodic(
        "outbox-relay", relay_outbox, lambda: scheduler_settings().outbox_relay_interval_ms / 1000
    ),
    # Every step locks rows with SKIP LOCKED or goes through the job-id gate.
    Periodic("maintenance", upkeep.maintain, lambda: scheduler_settings().maintenance_interval_s),
    # Cheap (one Redis command, the runs in flight); re-enqueues go through the job-id gate.
    Periodic("recovery", upkeep.recover, lambda: maintenance.RECOVERY_INTERVAL_S),
    # The console's charts: finished runs rolled up per minute (under a row lock).
    Periodic("run-stats", upkeep.roll_up_stats, lambda: run_stats.INTERVAL_S),
    *_registered(),
)
