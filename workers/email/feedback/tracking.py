"""Open and click tracking (opt-in per template: `EMAIL_TRACKED_TEMPLATES`; never for an org
whose `email_org_settings.tracking` is false).

The HTML part of a tracked email gets a 1x1 image (`<base>/o/<token>.gif`) before `</body>`,
and each `<a href="http(s)://...">` is rewritten to `<base>/c/<token>/<mac>?u=<url>`: `mac`
signs the email id with that exact URL, so the redirect only ever leads to a URL that was in
the rendered email (no open redirect), and the email token (tokens.py, expiring after
`EMAIL_UNSUBSCRIBE_TTL_S`) says which email and org. The text part is left as it is.
The first open of an email and each click are rows of `email_events` (time, user agent).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import re
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from uuid import UUID

import psycopg
from prometheus_client import Counter

from ..templates import Rendered
from . import tokens

if TYPE_CHECKING:
    from .. import store
    from ..settings import EmailSettings

PURPOSE = "track"
#: 43 bytes: the smallest transparent GIF.
PIXEL = bytes.fromhex(
    "47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b"
)
EVENTS = Counter(
    "jobfleet_email_feedback_total",
    "Email feedback recorded: first opens, clicks, unsubscribes, DSN bounces",
    ["event"],
)
_HREF = re.compile(r"""(<a\b[^>]*?\bhref\s*=\s*)(["'])(https?://[^"']+)\2""", re.IGNORECASE)


def enabled_check(org_id: UUID) -> tuple[str, tuple[Any, ...]]:
    """The scalar subquery (and its parameters) reading the org's switch, for `enabled_of`:
    read in the same statement as the row (store.load_for_send). NULL: no row."""
    return (
        "(SELECT coalesce(tracking, false) FROM email_org_settings WHERE org_id = %s)",
        (org_id,),
    )


def enabled_of(switch: bool | None, *, tracked: bool) -> bool:
    """`tracked`: the template opts in. No row (None): the org never turned tracking off."""
    if not tracked:
        return False
    return switch is None or bool(switch)


def set_org_tracking(conn: psycopg.Connection[Any], org_id: UUID, on: bool, now: datetime) -> None:
    conn.execute(
        "INSERT INTO email_org_settings (org_id, tracking, updated_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (org_id) DO UPDATE SET tracking = EXCLUDED.tracking,"
        " updated_at = EXCLUDED.updated_at",
        (org_id, on, now),
    )


def _url_mac(key: bytes, email_id: UUID, url: str) -> str:
    mac = hmac.new(
        hmac.new(key, b"jobfleet-email-click", hashlib.sha256).digest(),
        email_id.bytes + url.encode(),
        hashlib.sha256,
    ).digest()
    return tokens._b64(mac[:16])


def instrument(
    settings: EmailSettings, key: bytes, row: store.EmailRow, now: datetime, rendered: Rendered
) -> Rendered:
    """The rendered email with its HTML links rewritten and the pixel added."""
    token = tokens.sign(
        key, PURPOSE, row.id, row.org_id, now + timedelta(seconds=settings.unsubscribe_ttl_s)
    )
    base = settings.feedback_url.rstrip("/")

    def link(match: re.Match[str]) -> str:
        url = html.unescape(match.group(3))
        target = f"{base}/c/{token}/{_url_mac(key, row.id, url)}?u={quote(url, safe='')}"
        quote_char = match.group(2)
        return f"{match.group(1)}{quote_char}{html.escape(target, quote=True)}{quote_char}"

    body = _HREF.sub(link, rendered.html)
    pixel = f'<img src="{base}/o/{token}.gif" width="1" height="1" alt="" style="border:0">'
    at = body.lower().rfind("</body>")
    body = body[:at] + pixel + body[at:] if at >= 0 else body + pixel
    return replace(rendered, html=body)


def verify_open(key: bytes, token: str, now: datetime) -> tokens.EmailRef:
    return tokens.verify(key, PURPOSE, token, now)


def verify_click(key: bytes, token: str, mac: str, url: str, now: datetime) -> tokens.EmailRef:
    """The email of a click on `url`; `BadToken` unless `url` was in that email."""
    ref = tokens.verify(key, PURPOSE, token, now)
    if not hmac.compare_digest(mac.encode(), _url_mac(key, ref.email_id, url).encode()):
        raise tokens.BadToken("this URL was not in the email")
    return ref


_RECORD = (
    "INSERT INTO email_events (email_id, org_id, kind, url, user_agent, at)"
    " SELECT id, org_id, %s, %s, %s, %s FROM scheduled_emails WHERE id = %s AND org_id = %s"
)


def record_open(
    conn: psycopg.Connection[Any], ref: tokens.EmailRef, user_agent: str | None, now: datetime
) -> bool:
    """True for the first open of the email (later ones are not recorded)."""
    found = conn.execute(
        _RECORD + " ON CONFLICT (email_id) WHERE kind = 'open' DO NOTHING RETURNING id",
        ("open", None, (user_agent or "")[:500] or None, now, ref.email_id, ref.org_id),
    ).fetchone()
    if found is not None:
        EVENTS.labels(event="open").inc()
    return found is not None


def record_click(
    conn: psycopg.Connection[Any],
    ref: tokens.EmailRef,
    url: str,
    user_agent: str | None,
    now: datetime,
) -> bool:
    """Every click; False when the email no longer exists."""
    found = conn.execute(
        _RECORD + " RETURNING id",
        ("click", url, (user_agent or "")[:500] or None, now, ref.email_id, ref.org_id),
    ).fetchone()
    if found is not None:
        EVENTS.labels(event="click").inc()
    return found is not None


def counts(
    conn: psycopg.Connection[Any], org_id: UUID, email_id: UUID | None = None
) -> dict[str, int]:
    """`{"opened": emails opened, "clicks": clicks, "clicked": emails clicked}` of the org, or
    of one email."""
    found = conn.execute(
        "SELECT count(*) FILTER (WHERE kind = 'open'), count(*) FILTER (WHERE kind = 'click'),"
        " count(DISTINCT email_id) FILTER (WHERE kind = 'click')"
        " FROM email_events WHERE org_id = %s AND (%s::uuid IS NULL OR email_id = %s)",
        (org_id, email_id, email_id),
    ).fetchone()
    assert found is not None
    return {"opened": found[0], "clicks": found[1], "clicked": found[2]}
