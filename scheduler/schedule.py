"""The scheduler's periodic jobs, as a table: name, what runs, how often (from settings:
`scheduler/settings.py`).

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

from shared import maintenance
from shared.outbox import RelayStats, relay_once
from shared.runtime import Runtime

from . import upkeep
from .chain import jobs as chain
from .settings import indexer_settings, keeper_settings, scheduler_settings

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


SCHEDULE: tuple[Periodic, ...] = (
    Periodic(
        "outbox-relay", relay_outbox, lambda: scheduler_settings().outbox_relay_interval_ms / 1000
    ),
    # One active indexer across replicas: a Postgres advisory lock per window transaction.
    Periodic("chain-indexer", chain.index, lambda: indexer_settings().interval_ms / 1000),
    # One active keeper across replicas: the Redis lock `KEEPER_LOCK_KEY`, fenced.
    Periodic("lottery-keeper", chain.keep, lambda: keeper_settings().interval_ms / 1000),
    # The slot (minute) is the job's stable id: a second replica's send is a duplicate.
    Periodic(
        "email-run-due", upkeep.run_due_emails, lambda: scheduler_settings().email_due_interval_s
    ),
    # Every step locks rows with SKIP LOCKED or goes through the job-id gate.
    Periodic("maintenance", upkeep.maintain, lambda: scheduler_settings().maintenance_interval_s),
    # Cheap (one Redis command, the runs in flight); re-enqueues go through the job-id gate.
    Periodic("recovery", upkeep.recover, lambda: maintenance.RECOVERY_INTERVAL_S),
)
