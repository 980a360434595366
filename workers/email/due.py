"""`email-seq:run_due`: hand every due scheduled email to `email:send`, each exactly once.

Due rows (`SCHEDULED`, `send_at <= now`) are claimed with `FOR UPDATE SKIP LOCKED`, so two
passes running at once (two scheduler replicas, the CLI) split the rows instead of both taking
them. Each row is sent with its stable job id (derived from the row) and marked QUEUED in the
transaction that holds its lock; a pass that dies after sending but before committing leaves
the row SCHEDULED, and the next pass's send answers `duplicate`: one job, one email.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row

from shared.jobs.send import SendResult
from workers.email.contracts import EmailSendV1

from . import sequences, store

CLAIM_DUE = f"""
SELECT {store.COLUMNS} FROM scheduled_emails
 WHERE status = 'SCHEDULED' AND send_at <= %s
 ORDER BY send_at
 LIMIT %s
   FOR UPDATE SKIP LOCKED
"""


@dataclass(frozen=True)
class DueStats:
    enqueued: int = 0
    duplicates: int = 0
    canceled: int = 0

    def __add__(self, other: DueStats) -> DueStats:
        return DueStats(
            self.enqueued + other.enqueued,
            self.duplicates + other.duplicates,
            self.canceled + other.canceled,
        )


def run_due_once(
    conn: psycopg.Connection[Any],
    send: Callable[[EmailSendV1], SendResult],
    *,
    now: datetime,
    limit: int,
) -> tuple[DueStats, int]:
    """One batch in the caller's transaction; returns the stats and how many rows it claimed."""
    with conn.cursor(row_factory=class_row(store.EmailRow)) as cur:
        rows = cur.execute(CLAIM_DUE, (now, limit)).fetchall()
    enqueued = duplicates = canceled = 0
    for row in rows:
        if row.sequence_id is not None and not sequences.is_active(conn, row.sequence_id):
            store.mark(conn, row.id, "CANCELED", now, error_code="SEQUENCE_STOPPED")
            canceled += 1
            continue
        result = send(row.payload())
        store.mark(conn, row.id, "QUEUED", now)
        if result.duplicate:
            duplicates += 1
        else:
            enqueued += 1
    return DueStats(enqueued, duplicates, canceled), len(rows)


def run_due(
    connection: Callable[[], Any],
    send: Callable[[EmailSendV1], SendResult],
    *,
    now: datetime,
    batch: int = 500,
    max_batches: int = 100,
) -> DueStats:
    """Batches until no due row is left (or `max_batches`); each batch commits on its own."""
    total = DueStats()
    for _ in range(max_batches):
        with connection() as conn:
            conn.execute("SET LOCAL synchronous_commit TO on")
            stats, claimed = run_due_once(conn, send, now=now, limit=batch)
        total = total + stats
        if claimed < batch:
            break
    return total
