"""Building the MIME message: headers, a text part and its HTML alternative.

The Message-ID is derived from the job id, so every attempt, redelivery and replay of one
`email:send` carries the same Message-ID: a message that did reach the server before a crash
can be found in the server's logs by it, and mailbox providers that collapse equal Message-IDs
show a resend once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr

from .templates import HeaderInjection, Rendered


def message_id_for(job_id: str, domain: str) -> str:
    """`<sha256(job_id)[:32]@domain>`: stable per job, reveals nothing of the job id."""
    return f"<{hashlib.sha256(job_id.encode()).hexdigest()[:32]}@{domain}>"


@dataclass(frozen=True)
class Envelope:
    sender: str
    #: The primary recipient first, then the copies.
    recipients: tuple[str, ...]


def _single_line(name: str, value: str | None) -> None:
    if value is not None and ("\r" in value or "\n" in value):
        raise HeaderInjection(f"{name} holds CR/LF")


def _address(addr: str, name: str | None = None) -> Address:
    _single_line("address", addr)
    _single_line("display name", name)
    try:
        return Address(display_name=name or "", addr_spec=addr)
    except (ValueError, IndexError) as exc:
        raise HeaderInjection(f"invalid address {addr!r}: {exc}") from None


def envelope_sender(from_header: str) -> str:
    """The bare address of a `Name <addr>` From setting (the MAIL FROM of every message)."""
    return parseaddr(from_header)[1] or from_header


def build_message(
    rendered: Rendered,
    *,
    message_id: str,
    from_header: str,
    to: str,
    to_name: str | None = None,
    cc: Sequence[str] = (),
    reply_to: str | None = None,
    date: datetime,
    lang: str,
) -> tuple[EmailMessage, Envelope]:
    """The message and its envelope; CR/LF in any header value is a `HeaderInjection`."""
    _single_line("subject", rendered.subject)
    from_name, from_addr = parseaddr(from_header)
    msg = EmailMessage()
    try:
        msg["Message-ID"] = message_id
        msg["Date"] = format_datetime(date)
        msg["From"] = _address(from_addr or from_header, from_name or None)
        msg["To"] = _address(to, to_name)
        if cc:
            msg["Cc"] = [_address(a) for a in cc]
        if reply_to:
            msg["Reply-To"] = _address(reply_to)
        msg["Subject"] = rendered.subject
    except ValueError as exc:  # the email package refuses CR/LF in header values too
        raise HeaderInjection(str(exc)) from None
    msg.set_content(rendered.text)
    msg.add_alternative(rendered.html, subtype="html")
    msg["Content-Language"] = lang  # after the parts: set_content drops Content-* headers
    return msg, Envelope(sender=envelope_sender(from_header), recipients=(to, *cc))
