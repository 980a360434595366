"""The `scheduled_emails` rows: loading (scoped by org) and every state change of a send.

    SCHEDULED -> QUEUED -> SENDING -> SENT -> BOUNCED (a DSN, later: feedback/bounces.py)
                    \\          \\-> FAILED (5xx) | QUEUED (4xx, retried) | UNCONFIRMED
                     \\-> QUEUED (4xx or unreachable: deferred) -> ... | FAILED (outage window over)
                     \\-> FAILED (template, address) | CANCELED (sequence stopped)

SENDING is written durably just before DATA; SENT only after the server accepted the message.
Functions take an open psycopg connection; the caller owns the transaction. A send costs three
statements (issue 16: the round trips, not the rows, were the Postgres and worker CPU per email):
the row created or locked with the checks it needs (`load_for_send`, one statement), SENDING
and SENT each a single-statement durable commit on an `autocommit` connection (`DURABLE`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

from workers.email.contracts import EmailSendV1

SENDABLE = ("SCHEDULED", "QUEUED", "FAILED")


@dataclass(frozen=True)
class EmailRow:
    id: UUID
    org_id: UUID
    template_key: str
    lang: str
    recipient_email: str
    recipient_name: str | None
    cc: list[str]
    variables: dict[str, Any]
    reply_to: str | None
    status: str
    send_at: datetime
    sequence_id: UUID | None
    sequence_step: int | None
    message_id: str | None
    attempts: int
    sending_at: datetime | None
    sent_at: datetime | None

    def payload(self) -> EmailSendV1:
        """The `email:send` payload of this row (its stable job id follows from it)."""
        return EmailSendV1(
            org_id=self.org_id,
            entity_id=self.id,
            template_key=self.template_key,
            recipient_email=self.recipient_email,
            recipient_name=self.recipient_name,
            variables=self.variables,
            reply_to=self.reply_to,
            lang=self.lang,
        )


COLUMNS = ", ".join(EmailRow.__dataclass_fields__)

#: Created from the payload, or the existing row locked (FOR UPDATE's lock, taken by the no-op
#: update) when it belongs to the payload's org; no row returned for another org's id.
LOAD_FOR_SEND = f"""
INSERT INTO scheduled_emails (id, org_id, template_key, lang, recipient_email, recipient_name,
                              variables, reply_to, status, send_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'QUEUED', %s)
ON CONFLICT (id) DO UPDATE SET status = scheduled_emails.status
WHERE scheduled_emails.org_id = EXCLUDED.org_id
RETURNING {COLUMNS}"""


def load_for_send(
    conn: psycopg.Connection[Any],
    payload: EmailSendV1,
    now: datetime,
    *,
    also: Sequence[tuple[str, tuple[Any, ...]]] = (),
) -> tuple[EmailRow | None, list[Any]]:
    """The row of `payload.entity_id` in `payload.org_id`, locked; created from the payload when
    the producer sent the job without writing a row first. None: the id belongs to another org.
    `also`: scalar subqueries `(sql, params)` read in the same statement (the checks of a send:
    suppression, tracking switch); their values follow, None when no row is returned."""
    sql = LOAD_FOR_SEND + "".join(f", {subquery}" for subquery, _ in also)
    params: list[Any] = [
        payload.entity_id,
        payload.org_id,
        payload.template_key,
        payload.lang,
        payload.recipient_email,
        payload.recipient_name,
        Jsonb(payload.variables),
        payload.reply_to,
        now,
    ]
    for _, extra in also:
        params.extend(extra)
    found = conn.execute(sql, params).fetchone()
    if found is None:
        return None, [None] * len(also)
    width = len(EmailRow.__dataclass_fields__)
    return EmailRow(*found[:width]), list(found[width:])


#: In the FROM list of a write: its transaction (an autocommit statement's own) commits
#: durably (synchronous_commit on, which the worker's pool turns off) without a SET LOCAL
#: round trip.
DURABLE = "(SELECT set_config('synchronous_commit', 'on', true)) AS durable"


@contextlib.contextmanager
def autocommit(pool: ConnectionPool) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection whose statements each commit on their own: a single-statement write
    is one round trip (no BEGIN, no COMMIT). Transactional again when it goes back."""
    with pool.connection() as conn:
        conn.autocommit = True
        try:
            yield conn
        finally:
            try:
                conn.autocommit = False
            except psycopg.Error:
                conn.close()  # not fit for the next borrower: the pool replaces it


def get(
    conn: psycopg.Connection[Any], email_id: UUID, org_id: UUID, *, lock: bool = False
) -> EmailRow | None:
    sql = f"SELECT {COLUMNS} FROM scheduled_emails WHERE id = %s AND org_id = %s"
    with conn.cursor(row_factory=class_row(EmailRow)) as cur:
        return cur.execute(sql + (" FOR UPDATE" if lock else ""), (email_id, org_id)).fetchone()


def insert(
    conn: psycopg.Connection[Any],
    *,
    org_id: UUID,
    template_key: str,
    recipient_email: str,
    send_at: datetime,
    lang: str = "en",
    recipient_name: str | None = None,
    cc: list[str] | None = None,
    variables: dict[str, Any] | None = None,
    reply_to: str | None = None,
    sequence_id: UUID | None = None,
    sequence_step: int | None = None,
) -> UUID | None:
    """A SCHEDULED row; None when that sequence step exists already."""
    row = conn.execute(
        "INSERT INTO scheduled_emails (org_id, template_key, lang, recipient_email, recipient_name, cc,"
        " variables, reply_to, send_at, sequence_id, sequence_step)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (sequence_id, sequence_step) DO NOTHING RETURNING id",
        (
            org_id,
            template_key,
            lang,
            recipient_email,
            recipient_name,
            cc or [],
            Jsonb(variables or {}),
            reply_to,
            send_at,
            sequence_id,
            sequence_step,
        ),
    ).fetchone()
    return row[0] if row else None


def mark_sending(
    conn: psycopg.Connection[Any], email_id: UUID, message_id: str, now: datetime
) -> bool:
    """Claim the send, durably; False when another delivery holds it (or it is no longer
    sendable)."""
    claimed = conn.execute(
        "UPDATE scheduled_emails SET status = 'SENDING', message_id = %s, sending_at = %s,"
        " attempts = attempts + 1, error_code = NULL, error = NULL, updated_at = %s"
        f" FROM {DURABLE} WHERE id = %s AND status = ANY(%s) RETURNING id",
        (message_id, now, now, email_id, list(SENDABLE)),
    ).fetchone()
    return claimed is not None


def mark_sent(
    conn: psycopg.Connection[Any],
    email_id: UUID,
    reply: str,
    refused: dict[str, str],
    now: datetime,
) -> None:
    """SENT, durably."""
    conn.execute(
        "UPDATE scheduled_emails SET status = 'SENT', smtp_reply = %s, refused = %s, sent_at = %s,"
        f" updated_at = %s FROM {DURABLE} WHERE id = %s",
        (reply, Jsonb(refused) if refused else None, now, now, email_id),
    )


def mark(
    conn: psycopg.Connection[Any],
    email_id: UUID,
    status: str,
    now: datetime,
    *,
    error_code: str | None = None,
    error: str | None = None,
    smtp_reply: str | None = None,
    attempted: bool = False,
) -> None:
    """FAILED, QUEUED (a retry is coming), UNCONFIRMED or CANCELED, with the reason.
    `attempted`: an SMTP attempt that failed before SENDING was recorded (it counts too)."""
    conn.execute(
        "UPDATE scheduled_emails SET status = %s, error_code = %s, error = %s,"
        " smtp_reply = COALESCE(%s, smtp_reply), attempts = attempts + %s, updated_at = %s WHERE id = %s",
        (status, error_code, error, smtp_reply, int(attempted), now, email_id),
    )


def mark_deferred(
    conn: psycopg.Connection[Any],
    email_id: UUID,
    now: datetime,
    *,
    error_code: str,
    error: str,
    smtp_reply: str | None,
    attempted: bool,
) -> tuple[datetime, int]:
    """QUEUED again after a 4xx reply or a connection failure; returns when the deferrals in a
    row began and how many there have been (the outage window and the next wait follow)."""
    row = conn.execute(
        "UPDATE scheduled_emails SET status = 'QUEUED', error_code = %s, error = %s,"
        " smtp_reply = COALESCE(%s, smtp_reply), attempts = attempts + %s,"
        " deferred_since = COALESCE(deferred_since, %s), deferrals = deferrals + 1,"
        " updated_at = %s WHERE id = %s RETURNING deferred_since, deferrals",
        (error_code, error, smtp_reply, int(attempted), now, now, email_id),
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def clear_deferral(conn: psycopg.Connection[Any], email_id: UUID) -> None:
    """A fresh outage window (an operator's resend of an email that FAILED after one)."""
    conn.execute(
        "UPDATE scheduled_emails SET deferred_since = NULL, deferrals = 0 WHERE id = %s",
        (email_id,),
    )
