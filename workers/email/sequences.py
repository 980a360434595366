"""Email sequences (onboarding, reminders): steps sent one after another, relative to the
actual send of the previous step, and stopped for good by an unsubscribe or a bounce.

A sequence holds its steps `[{"template_key": ..., "delay_s": ...}]`. Only the next step
exists as a `scheduled_emails` row: it is created when the previous one is marked SENT (in the
same transaction), due `delay_s` after that send, so a step that waited for a retry pushes the
rest back instead of bunching them up. `email_suppressions` (UNSUBSCRIBED, BOUNCED) stops every
active sequence of the address and cancels its pending step. An unsubscribe applies to
sequences only: a transactional email (a sign-in code) is still sent to an unsubscribed
address. A bounce applies to every send (delivery.py), unless the template is exempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from . import store

UNSUBSCRIBED = "UNSUBSCRIBED"
BOUNCED = "BOUNCED"


@dataclass(frozen=True)
class Step:
    template_key: str
    delay_s: int = 0

    def wire(self) -> dict[str, Any]:
        return {"template_key": self.template_key, "delay_s": self.delay_s}


def start(
    conn: psycopg.Connection[Any],
    *,
    org_id: UUID,
    name: str,
    recipient_email: str,
    steps: Sequence[Step],
    now: datetime,
    lang: str = "en",
    recipient_name: str | None = None,
    variables: dict[str, Any] | None = None,
    reply_to: str | None = None,
) -> UUID:
    """Create the sequence and its first step, due `steps[0].delay_s` from `now`."""
    if not steps:
        raise ValueError("a sequence needs at least one step")
    row = conn.execute(
        "INSERT INTO email_sequences (org_id, name, recipient_email, recipient_name, lang, variables,"
        " reply_to, steps) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            org_id,
            name,
            recipient_email,
            recipient_name,
            lang,
            Jsonb(variables or {}),
            reply_to,
            Jsonb([s.wire() for s in steps]),
        ),
    ).fetchone()
    assert row is not None
    sequence_id: UUID = row[0]
    _schedule_step(conn, sequence_id, 0, now + timedelta(seconds=steps[0].delay_s))
    reason = _suppression_reason(conn, org_id, recipient_email)
    if reason is not None:  # an address that opted out earlier never starts a sequence
        stop(conn, org_id, recipient_email, reason=reason, now=now)
    return sequence_id


def _schedule_step(
    conn: psycopg.Connection[Any], sequence_id: UUID, step: int, send_at: datetime
) -> UUID | None:
    seq = conn.execute(
        "SELECT org_id, recipient_email, recipient_name, lang, variables, reply_to, steps"
        " FROM email_sequences WHERE id = %s",
        (sequence_id,),
    ).fetchone()
    assert seq is not None
    org_id, email, name, lang, variables, reply_to, steps = seq
    return store.insert(
        conn,
        org_id=org_id,
        template_key=steps[step]["template_key"],
        recipient_email=email,
        recipient_name=name,
        lang=lang,
        variables=variables,
        reply_to=reply_to,
        send_at=send_at,
        sequence_id=sequence_id,
        sequence_step=step,
    )


def after_sent(
    conn: psycopg.Connection[Any], row: store.EmailRow, sent_at: datetime
) -> UUID | None:
    """Schedule the step after `row` relative to `sent_at`, or complete the sequence."""
    if row.sequence_id is None or row.sequence_step is None:
        return None
    seq = conn.execute(
        "SELECT status, steps FROM email_sequences WHERE id = %s FOR UPDATE", (row.sequence_id,)
    ).fetchone()
    if seq is None or seq[0] != "ACTIVE":
        return None
    steps = seq[1]
    following = row.sequence_step + 1
    if following >= len(steps):
        conn.execute(
            "UPDATE email_sequences SET status = 'COMPLETED', current_step = %s, updated_at = %s WHERE id = %s",
            (row.sequence_step, sent_at, row.sequence_id),
        )
        return None
    conn.execute(
        "UPDATE email_sequences SET current_step = %s, updated_at = %s WHERE id = %s",
        (following, sent_at, row.sequence_id),
    )
    return _schedule_step(
        conn, row.sequence_id, following, sent_at + timedelta(seconds=steps[following]["delay_s"])
    )


def is_active(conn: psycopg.Connection[Any], sequence_id: UUID) -> bool:
    row = conn.execute(
        "SELECT status FROM email_sequences WHERE id = %s", (sequence_id,)
    ).fetchone()
    return row is not None and row[0] == "ACTIVE"


def bounce_check(org_id: UUID, email: str) -> tuple[str, tuple[Any, ...]]:
    """The scalar subquery (and its parameters) reading the bounce that suppressed `email` in
    the org, for `bounce_of`: read in the same statement as the row (store.load_for_send).
    NULL: no bounce; "" : a bounce without detail."""
    return (
        "(SELECT coalesce(detail, '') FROM email_suppressions WHERE org_id = %s"
        " AND email = lower(%s) AND reason = %s)",
        (org_id, email, BOUNCED),
    )


def bounce_of(detail: str | None) -> str | None:
    """ "BOUNCED: 550 ..." when the address hard-bounced, else None. Checked before every send,
    transactional ones included (issue 16)."""
    return None if detail is None else f"{BOUNCED}: {detail or 'hard bounce'}"


def is_suppressed(conn: psycopg.Connection[Any], org_id: UUID, email: str) -> bool:
    return _suppression_reason(conn, org_id, email) is not None


def _suppression_reason(conn: psycopg.Connection[Any], org_id: UUID, email: str) -> Any:
    row = conn.execute(
        "SELECT reason FROM email_suppressions WHERE org_id = %s AND email = lower(%s)",
        (org_id, email),
    ).fetchone()
    return row[0] if row else None


def suppress(
    conn: psycopg.Connection[Any],
    org_id: UUID,
    email: str,
    *,
    reason: str,
    now: datetime,
    detail: str | None = None,
) -> int:
    """Record an unsubscribe or a bounce and stop the address's sequences; returns how many."""
    conn.execute(
        "INSERT INTO email_suppressions (org_id, email, reason, detail, created_at)"
        " VALUES (%s, lower(%s), %s, %s, %s) ON CONFLICT (org_id, email) DO NOTHING",
        (org_id, email, reason, detail, now),
    )
    return stop(conn, org_id, email, reason=reason, now=now)


def unsubscribe(conn: psycopg.Connection[Any], org_id: UUID, email: str, *, now: datetime) -> int:
    return suppress(conn, org_id, email, reason=UNSUBSCRIBED, now=now)


def stop(
    conn: psycopg.Connection[Any], org_id: UUID, email: str, *, reason: str, now: datetime
) -> int:
    stopped = conn.execute(
        "UPDATE email_sequences SET status = 'STOPPED', stop_reason = %s, updated_at = %s"
        " WHERE org_id = %s AND lower(recipient_email) = lower(%s) AND status = 'ACTIVE' RETURNING id",
        (reason, now, org_id, email),
    ).fetchall()
    ids = [r[0] for r in stopped]
    if ids:
        conn.execute(
            "UPDATE scheduled_emails SET status = 'CANCELED', error_code = %s, updated_at = %s"
            " WHERE sequence_id = ANY(%s) AND status = 'SCHEDULED'",
            (f"SEQUENCE_{reason}", now, ids),
        )
    return len(ids)
