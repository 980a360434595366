"""Emails held back because the SMTP relay refuses the fleet's configuration (`smtp.SmtpRelayFault`:
credentials, AUTH or STARTTLS required, a TLS setting it cannot serve): the loud signal of
`fleet status` and the console's Overview, read from `scheduled_emails` (QUEUED rows whose last
deferral was such a fault)."""

from __future__ import annotations

from typing import Any

#: The error codes of `smtp._relay_fault`.
CODES = ("SMTP_AUTH_FAILED", "SMTP_AUTH_REQUIRED", "SMTP_TLS_MISMATCH")

QUERY = """
SELECT error_code, count(*), max(updated_at),
       (array_agg(error ORDER BY updated_at DESC))[1]
  FROM scheduled_emails
 WHERE status = 'QUEUED' AND error_code = ANY(%s){scope}
 GROUP BY error_code ORDER BY error_code
"""


def held(conn: Any, orgs: list[Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """One entry per fault: its code, the emails it holds, when it last happened, its error."""
    scope, params = (" AND org_id = ANY(%s)", [list(orgs)]) if orgs else ("", [])
    rows = conn.execute(QUERY.format(scope=scope), [list(CODES), *params]).fetchall()
    return [
        {"code": code, "emails": int(count), "last_at": last_at, "error": error}
        for code, count, last_at, error in rows
    ]
