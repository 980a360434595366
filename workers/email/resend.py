"""Operator action: send again an email whose outcome is unknown (UNCONFIRMED) or that failed.

Never automatic: an UNCONFIRMED email may well be in the recipient's mailbox already. The
operator checks first whether the SMTP server queued it (docs/email.md; `fleet email
check-log` for Postfix); the resend replays the DEAD
`email:send` run (audited by the DLQ) and carries the same Message-ID.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from shared import dlq
from shared.errors import InvalidState, RunNotFound
from shared.jobs import catalog
from shared.runtime import Runtime

from . import store

RESENDABLE = ("UNCONFIRMED", "FAILED")


def resend(runtime: Runtime, email_id: UUID, org_id: UUID, *, by: str, now: datetime) -> dlq.Replay:
    with runtime.pool.connection() as conn:
        row = store.get(conn, email_id, org_id, lock=True)
        if row is None:
            raise RunNotFound(f"no scheduled email {email_id} in org {org_id}")
        if row.status not in RESENDABLE:
            raise InvalidState(
                f"email {email_id} is {row.status}; only {', '.join(RESENDABLE)} can be resent"
            )
        store.mark(conn, row.id, "QUEUED", now, error_code=None, error=f"resend requested by {by}")
        store.clear_deferral(conn, row.id)  # a fresh outage window
    try:
        return dlq.replay(
            catalog.EMAIL_SEND.job_id(row.payload()), org_id=org_id, by=by, runtime=runtime
        )
    except Exception:
        with runtime.pool.connection() as conn:  # leave the row as it was
            store.mark(
                conn,
                row.id,
                row.status,
                now,
                error_code="EMAIL_UNCONFIRMED" if row.status == "UNCONFIRMED" else None,
                error="resend failed",
            )
        raise
