"""Transactional outbox: a job written in the caller's transaction, published after commit.

`enqueue(session, job, payload)` adds an `outbox_events` row (and a NOTIFY) to the caller's
SQLAlchemy transaction: no commit, no job. The relay claims due rows with
`FOR UPDATE SKIP LOCKED`, sends each through the normal producer path (whose job-id dedup makes
a re-publish after a relay crash answer `duplicate`, so a commit gives exactly one job id) and
marks it PUBLISHED in the same transaction that holds the row lock, so two relays never publish
one event. Broker down: the row stays PENDING and is retried on `outbox_backoff_s`; after the
last step it is FAILED with the reason.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import structlog
from sqlalchemy import text
from sqlalchemy.orm import Session

from .contracts.base import Payload
from .db.connect import pooled
from .db.models import OutboxEvent
from .errors import FleetError
from .jobs import catalog
from .jobs.context import request_id_var
from .jobs.handler import BoundJob
from .jobs.spec import JobSpec
from .observability.metrics import OUTBOX_PUBLISHED
from .runtime import Runtime, installed_runtime

log = structlog.get_logger("jobfleet.outbox")

CHANNEL = "jobfleet_outbox"


def enqueue(
    session: Session,
    job: JobSpec[Any] | BoundJob[Any],
    payload: Payload | Mapping[str, Any],
    *,
    event_type: str | None = None,
    request_id: str | None = None,
) -> OutboxEvent:
    """Validate now (a `PayloadError` raises in the caller's request) and stage the event."""
    spec = job.spec if isinstance(job, BoundJob) else job
    model = spec.build(payload)
    event = OutboxEvent(
        id=uuid.uuid4(),
        org_id=model.org_id,
        type=event_type or spec.name,
        job_name=spec.name,
        job_id=spec.job_id(model),
        payload=model.wire(),
        request_id=request_id or request_id_var.get(),
        status="PENDING",
        attempts=0,
    )
    runtime = installed_runtime()
    if runtime is not None and runtime.captures_sends:  # the test kit records it instead
        runtime.sender.record(  # type: ignore[attr-defined]
            spec, model, request_id=event.request_id, delay_ms=None, via="outbox"
        )
        return event
    session.add(event)
    session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})
    return event


@dataclass(frozen=True)
class RelayStats:
    published: int = 0
    duplicates: int = 0
    retried: int = 0
    failed: int = 0

    @property
    def claimed(self) -> int:
        return self.published + self.duplicates + self.retried + self.failed


CLAIM = """
SELECT id, job_name, payload, request_id, attempts
  FROM outbox_events
 WHERE status = 'PENDING' AND next_attempt_at <= %s
 ORDER BY next_attempt_at, created_at
 LIMIT %s
   FOR UPDATE SKIP LOCKED
"""


def relay_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def relay_once(runtime: Runtime, *, now: datetime, relay: str | None = None) -> RelayStats:
    """Publish every due event once (at most `outbox_batch`); the clock is a parameter."""
    settings = runtime.settings
    schedule = settings.outbox_backoff_s
    relay = relay or relay_id()
    published = duplicates = retried = failed = 0
    with runtime.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        rows = conn.execute(CLAIM, (now, settings.outbox_batch)).fetchall()
        for event_id, job_name, payload, request_id, attempts in rows:
            conn.execute(
                "UPDATE outbox_events SET locked_by = %s, locked_at = %s WHERE id = %s",
                (relay, now, event_id),
            )
            try:
                # Through this relay's runtime (its broker), not the process-global one.
                spec = catalog.get(job_name)
                result = runtime.sender.send(spec, payload, request_id=request_id)
            except FleetError as exc:
                attempts += 1
                if (
                    attempts >= len(schedule)
                    or exc.code == "INVALID_PAYLOAD"
                    or exc.code == "UNKNOWN_JOB"
                ):
                    conn.execute(
                        "UPDATE outbox_events SET status = 'FAILED', attempts = %s, error = %s WHERE id = %s",
                        (attempts, f"{exc.code}: {exc}", event_id),
                    )
                    failed += 1
                    OUTBOX_PUBLISHED.labels("failed").inc()
                    log.error(
                        "outbox.failed", event_id=str(event_id), job_name=job_name, error=str(exc)
                    )
                else:
                    retry_at = now + timedelta(seconds=schedule[attempts - 1])
                    conn.execute(
                        "UPDATE outbox_events SET attempts = %s, next_attempt_at = %s, error = %s WHERE id = %s",
                        (attempts, retry_at, f"{exc.code}: {exc}", event_id),
                    )
                    retried += 1
                    OUTBOX_PUBLISHED.labels("retried").inc()
                    log.warning(
                        "outbox.retry",
                        event_id=str(event_id),
                        job_name=job_name,
                        retry_at=retry_at.isoformat(),
                        error=str(exc),
                    )
                continue
            conn.execute(
                "UPDATE outbox_events SET status = 'PUBLISHED', published_at = %s, attempts = %s, error = NULL WHERE id = %s",
                (now, attempts + 1, event_id),
            )
            if result.duplicate:
                duplicates += 1
            else:
                published += 1
            OUTBOX_PUBLISHED.labels("duplicate" if result.duplicate else "published").inc()
    return RelayStats(published, duplicates, retried, failed)


def run_relay(runtime: Runtime, stop: threading.Event, *, interval_s: float = 1.0) -> None:
    """The relay loop of `fleet outbox relay` and the scheduler: every second, or on NOTIFY."""
    relay = relay_id()
    listener: psycopg.Connection[Any] | None = None
    # Behind a transaction-mode pooler LISTEN hears nothing (its server connection goes back to
    # the pool once the statement ends): the relay then polls every `interval_s`.
    listens = not pooled(runtime.settings)
    log.info("outbox.relay_started", relay=relay, listens=listens)
    try:
        while not stop.is_set():
            try:
                stats = relay_once(runtime, now=datetime.now(UTC), relay=relay)
                if stats.claimed:
                    log.info("outbox.relayed", **stats.__dict__)
                    if stats.claimed >= runtime.settings.outbox_batch:
                        continue
            except psycopg.Error as exc:
                log.error("outbox.relay_error", error=str(exc))
            if not listens:
                stop.wait(interval_s)
                continue
            try:
                if listener is None or listener.closed:
                    listener = psycopg.connect(
                        runtime.settings.database_dsn, autocommit=True, connect_timeout=3
                    )
                    listener.execute(f"LISTEN {CHANNEL}")
                for _ in listener.notifies(timeout=interval_s, stop_after=1):
                    break
            except psycopg.Error:
                listener = None
                stop.wait(interval_s)
    finally:
        if listener is not None:
            listener.close()
