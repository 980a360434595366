"""Rows, payloads and waits shared by the email tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from shared.jobs import catalog, runs
from shared.jobs.runs import RunView
from tests.support.wait import wait_for
from workers.email import store

OTP_VARS = {"CODE": "482915", "EXPIRES_MINUTES": "10"}


def schedule(
    db: psycopg.Connection[Any],
    to: str,
    *,
    org: uuid.UUID | None = None,
    template: str = "otp-code",
    variables: dict[str, Any] | None = None,
    lang: str = "en",
    cc: list[str] | None = None,
    name: str | None = None,
    reply_to: str | None = None,
    send_at: datetime | None = None,
) -> store.EmailRow:
    org = org or uuid.uuid4()
    email_id = store.insert(
        db,
        org_id=org,
        template_key=template,
        recipient_email=to,
        send_at=send_at or datetime.now(UTC),
        lang=lang,
        recipient_name=name,
        cc=cc,
        variables=OTP_VARS if variables is None else variables,
        reply_to=reply_to,
    )
    assert email_id is not None
    row = store.get(db, email_id, org)
    assert row is not None
    return row


def row(db: psycopg.Connection[Any], email_id: uuid.UUID) -> dict[str, Any]:
    """The row as a dict ({} while it does not exist)."""
    with db.cursor(row_factory=dict_row) as cur:
        found = cur.execute("SELECT * FROM scheduled_emails WHERE id = %s", (email_id,)).fetchone()
    return found or {}


def wait_row(
    db: psycopg.Connection[Any], email_id: uuid.UUID, *statuses: str, timeout: float = 15
) -> dict[str, Any]:
    return wait_for(
        lambda: (r := row(db, email_id)).get("status") in statuses and r,
        timeout=timeout,
        what=f"email {email_id} in {statuses}",
    )


def job_id(email: store.EmailRow) -> str:
    return catalog.EMAIL_SEND.job_id(email.payload())


def wait_run(email: store.EmailRow, *statuses: str, timeout: float = 15) -> RunView:
    jid = job_id(email)
    return wait_for(
        lambda: (
            (r := runs.find(jid, org_id=email.org_id)) is not None and r.status in statuses and r
        ),
        timeout=timeout,
        what=f"run {jid} in {statuses}",
    )


def unique(local: str) -> str:
    return f"{local}-{uuid.uuid4().hex[:8]}@example.com"
