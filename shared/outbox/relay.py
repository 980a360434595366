"""The outbox relay: publish staged jobs through the normal producer path.

The relay claims due events with `FOR UPDATE SKIP LOCKED`, sends each through the producer path
(whose job-id dedup makes a re-publish after a relay crash answer `duplicate`, so a commit gives
exactly one job id) and marks it PUBLISHED in the same transaction that holds the row lock, so
two relays never publish one event. That transaction also records the message id on the STAGED
run: an operator's cancel that comes next skips that very message. Broker down: the event stays
PENDING and is retried on `outbox_backoff_s`; after the last step, or for a payload the contract
refuses, it is FAILED with the reason, and its STAGED run DEAD with the same reason.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import structlog

from ..db.connect import pooled
from ..errors import FleetError
from ..jobs import catalog
from ..observability.metrics import OUTBOX_PUBLISHED
from ..runtime import Runtime
from .stage import CHANNEL

log = structlog.get_logger("jobfleet.outbox")


@dataclass(frozen=True)
class RelayStats:
    published: int = 0
    duplicates: int = 0
    retried: int = 0
    failed: int = 0

    @property
    def claimed(self) -> int:
        return self.published + self.duplicates + self.retried + self.failed


COLUMNS = "id, job_id, job_name, payload, request_id, attempts, deliver_at, priority"
CLAIM = f"""
SELECT {COLUMNS}
  FROM outbox_events
 WHERE status = 'PENDING' AND next_attempt_at <= %s
 ORDER BY next_attempt_at, created_at
 LIMIT %s
   FOR UPDATE SKIP LOCKED
"""
#: The events a producer staged with `at_commit=True`, right after its commit (due or not: the
#: producer's clock is not the database's).
CLAIM_THESE = f"""
SELECT {COLUMNS}
  FROM outbox_events
 WHERE id = ANY(%s) AND status = 'PENDING'
 ORDER BY created_at
   FOR UPDATE SKIP LOCKED
"""
#: Published: the run's message id, on its own and at once (the QUEUED row follows from the
#: producer path's writer, which writes the message id too). A row the writer is writing is
#: skipped, never waited for: held in the relay's batch transaction, this update deadlocked
#: with the writer's statement taking the same rows in another order (two relays, 200 events).
MESSAGE_OF_STAGED = """
UPDATE job_runs SET message_id = %s
 WHERE id = (SELECT id FROM job_runs WHERE job_id = %s AND status = 'STAGED'
               FOR UPDATE SKIP LOCKED)
"""
#: Never published (a refused payload, the broker down past the last retry): the run says why.
NEVER_PUBLISHED = """
UPDATE job_runs SET status = 'DEAD', error_code = %s, error = %s, finished_at = now()
 WHERE job_id = %s AND status = 'STAGED'
"""


def relay_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def relay_once(
    runtime: Runtime,
    *,
    now: datetime,
    relay: str | None = None,
    event_ids: Sequence[UUID] | None = None,
) -> RelayStats:
    """Publish every due event once (at most `outbox_batch`), or only `event_ids`; the clock
    is a parameter."""
    settings = runtime.settings
    schedule = settings.outbox_backoff_s
    relay = relay or relay_id()
    published = duplicates = retried = failed = 0
    with runtime.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        if event_ids is None:
            rows = conn.execute(CLAIM, (now, settings.outbox_batch)).fetchall()
        else:
            rows = conn.execute(CLAIM_THESE, (list(event_ids),)).fetchall()
        for event_id, job_id, job_name, payload, request_id, attempts, due, priority in rows:
            conn.execute(
                "UPDATE outbox_events SET locked_by = %s, locked_at = %s WHERE id = %s",
                (relay, now, event_id),
            )
            delay_ms = None if due is None else int((due - now).total_seconds() * 1000)
            try:
                # Through this relay's runtime (its broker), not the process-global one.
                spec = catalog.get(job_name)
                result = runtime.sender.send(
                    spec,
                    payload,
                    request_id=request_id,
                    delay_ms=delay_ms if delay_ms is not None and delay_ms > 0 else None,
                    priority=priority,
                )
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
                    conn.execute(NEVER_PUBLISHED, (exc.code, f"not published: {exc}", job_id))
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
                if result.message_id is not None:
                    with runtime.pool.connection() as own:  # its own short transaction
                        own.execute(MESSAGE_OF_STAGED, (result.message_id, job_id))
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
