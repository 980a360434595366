"""One-click unsubscribe (RFC 8058, RFC 2369): the headers of a message, and the unsubscribe.

Every email carries

    List-Unsubscribe: <https://.../unsubscribe/<token>>, <mailto:...?subject=unsubscribe%20<token>>
    List-Unsubscribe-Post: List-Unsubscribe=One-Click

except transactional templates (`EMAIL_TRANSACTIONAL_TEMPLATES`: sign-in codes, replies) that
are not a sequence step. The token names the email (and its org), signed and expiring after
`EMAIL_UNSUBSCRIBE_TTL_S`: a POST of the URL (what a mailbox provider sends when the user clicks
"unsubscribe") suppresses the recipient for that org (UNSUBSCRIBED) and stops its active
sequences; a second POST changes nothing. A GET (a link scanner, a user's browser) changes
nothing either: it answers a page whose button POSTs.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import psycopg
import structlog

from .. import sequences, store
from . import tokens
from .tracking import EVENTS

if TYPE_CHECKING:
    from ..settings import EmailSettings

log = structlog.get_logger("jobfleet.email.feedback")

PURPOSE = "unsubscribe"
ONE_CLICK = "List-Unsubscribe=One-Click"


def wants_headers(settings: EmailSettings, row: store.EmailRow) -> bool:
    return row.sequence_id is not None or (row.template_key not in settings.transactional_templates)


def unsubscribe_url(settings: EmailSettings, token: str) -> str:
    return f"{settings.feedback_url.rstrip('/')}/unsubscribe/{token}"


def headers(
    settings: EmailSettings, key: bytes, row: store.EmailRow, now: datetime
) -> dict[str, str]:
    """The List-Unsubscribe headers of `row`'s message (none for a transactional template)."""
    if not wants_headers(settings, row):
        return {}
    expires = now + timedelta(seconds=settings.unsubscribe_ttl_s)
    token = tokens.sign(key, PURPOSE, row.id, row.org_id, expires)
    targets = [f"<{unsubscribe_url(settings, token)}>"]
    if settings.unsubscribe_mailto:
        subject = quote(f"unsubscribe {token}")
        targets.append(f"<mailto:{settings.unsubscribe_mailto}?subject={subject}>")
    return {"List-Unsubscribe": ", ".join(targets), "List-Unsubscribe-Post": ONE_CLICK}


@dataclass(frozen=True)
class Unsubscribed:
    email: str
    #: False: the address was suppressed already (a repeated POST).
    new: bool
    sequences_stopped: int


def unsubscribe(
    conn: psycopg.Connection[Any], ref: tokens.EmailRef, now: datetime
) -> Unsubscribed | None:
    """Suppress the recipient of the email `ref` names for its org; None: no such email."""
    row = store.get(conn, ref.email_id, ref.org_id)
    if row is None:
        return None
    already = sequences.is_suppressed(conn, row.org_id, row.recipient_email)
    stopped = sequences.unsubscribe(conn, row.org_id, row.recipient_email, now=now)
    if not already:
        EVENTS.labels(event="unsubscribe").inc()
    log.info(
        "email.unsubscribed",
        email_id=str(row.id),
        org_id=str(row.org_id),
        new=not already,
        sequences_stopped=stopped,
    )
    return Unsubscribed(row.recipient_email, not already, stopped)


_MAILTO_SUBJECT = re.compile(r"\bunsubscribe\s+([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)", re.IGNORECASE)


def by_mail(
    conn: psycopg.Connection[Any], key: bytes, raw: bytes, now: datetime
) -> Unsubscribed | None:
    """The List-Unsubscribe mailto: a message whose Subject is `unsubscribe <token>` (the link's
    token, signed and expiring as for the URL). `tokens.BadToken` when there is none."""
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    found = _MAILTO_SUBJECT.search(str(msg.get("Subject") or ""))
    if found is None:
        raise tokens.BadToken("no `unsubscribe <token>` subject")
    return unsubscribe(conn, tokens.verify(key, PURPOSE, found.group(1), now), now)
