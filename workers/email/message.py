"""Building the MIME message: headers, a text part and its HTML alternative.

The Message-ID is derived from the job id, so every attempt, redelivery and replay of one
`email:send` carries the same Message-ID: a message that did reach the server before a crash
can be found in the server's logs by it, and mailbox providers that collapse equal Message-IDs
show a resend once.

Internationalised addresses (issue 16; RFC 5890, RFC 6531): a domain always travels as its
IDNA A-label (`müller.example` -> `xn--mller-kva.example`) in the envelope and in the headers,
so an ASCII local part never needs anything from the server; an address is never put in an
RFC 2047 encoded-word (RFC 2047 §5 forbids it). A non-ASCII local part (`josé@`, `用户@`) cannot
be written in ASCII at all: the envelope says `smtputf8`, the message is serialized as UTF-8
headers, and the transport needs a server offering SMTPUTF8 (else a permanent failure).
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email import policy
from email.charset import QP, Charset
from email.header import Header
from email.headerregistry import Address
from email.message import EmailMessage, Message
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.utils import format_datetime, formataddr, parseaddr

import idna

from shared.errors import PermanentError

from .templates import HeaderInjection, Rendered


class InvalidAddress(PermanentError):
    """An address whose domain has no IDNA form (or no domain at all)."""

    code = "INVALID_ADDRESS"


def message_id_for(job_id: str, domain: str) -> str:
    """`<sha256(job_id)[:32]@domain>`: stable per job, reveals nothing of the job id."""
    return f"<{hashlib.sha256(job_id.encode()).hexdigest()[:32]}@{domain}>"


@dataclass(frozen=True)
class Envelope:
    sender: str
    #: The primary recipient first, then the copies.
    recipients: tuple[str, ...]
    #: Some address has a non-ASCII local part: MAIL FROM needs SMTPUTF8 (RFC 6531).
    smtputf8: bool = False


_COMPAT32_SMTP = policy.compat32.clone(linesep="\r\n")


def serialize(message: Message, envelope: Envelope) -> bytes:
    """The bytes sent after DATA: UTF-8 headers only when the envelope needs SMTPUTF8."""
    if envelope.smtputf8:
        return message.as_bytes(policy=policy.SMTPUTF8)
    out: list[str] = []
    _flatten(message, out)
    return "".join(out).encode("ascii")


def _flatten(msg: Message, out: list[str]) -> None:
    """What the compat32 generator writes for the messages `_build_ascii` makes (ASCII headers,
    bodies already transfer-encoded), without its per-header `Header` objects: the generator
    was a quarter of a worker's CPU in the benchmark. Long or encoded headers still go through
    the policy's folding."""
    for name, value in msg.items():
        if isinstance(value, str) and "\n" not in value and len(name) + len(value) < 76:
            out.append(f"{name}: {value}\r\n")
        else:
            out.append(_COMPAT32_SMTP.fold(name, value))
    out.append("\r\n")
    if msg.is_multipart():
        boundary = msg.get_boundary()
        assert boundary is not None
        parts = msg.get_payload()
        assert isinstance(parts, list)
        for index, part in enumerate(parts):
            out.append(("" if index == 0 else "\r\n") + f"--{boundary}\r\n")
            _flatten(part, out)
        out.append(f"\r\n--{boundary}--\r\n")
    else:
        payload = msg.get_payload()
        assert isinstance(payload, str)
        out.append(payload.replace("\r\n", "\n").replace("\n", "\r\n"))


def ascii_domain(addr: str) -> tuple[str, str]:
    """`(local part, domain as IDNA A-label)` of a bare address; `InvalidAddress` otherwise."""
    local, at, domain = addr.rpartition("@")
    if not at or not local or not domain:
        raise InvalidAddress(f"invalid address {addr!r}: no local part or domain")
    if domain.isascii():
        return local, domain.lower()
    try:
        return local, idna.encode(domain, uts46=True).decode("ascii")
    except idna.IDNAError as exc:
        raise InvalidAddress(
            f"invalid address {addr!r}: the domain has no IDNA form: {exc}"
        ) from None


def envelope_address(addr: str) -> str:
    """The address as written in MAIL FROM / RCPT TO: its domain as an A-label."""
    local, domain = ascii_domain(addr)
    return f"{local}@{domain}"


def _single_line(name: str, value: str | None) -> None:
    if value is not None and ("\r" in value or "\n" in value):
        raise HeaderInjection(f"{name} holds CR/LF")


def _address(addr: str, name: str | None = None) -> Address:
    _single_line("address", addr)
    _single_line("display name", name)
    local, domain = ascii_domain(addr)
    try:
        # username/domain rather than addr_spec: the parser refuses a non-ASCII local part.
        return Address(display_name=name or "", username=local, domain=domain)
    except (ValueError, IndexError) as exc:
        raise HeaderInjection(f"invalid address {addr!r}: {exc}") from None


def envelope_sender(from_header: str) -> str:
    """The bare address of a `Name <addr>` From setting (the MAIL FROM of every message)."""
    return parseaddr(from_header)[1] or from_header


@functools.lru_cache(maxsize=16)
def _from_setting(from_header: str) -> tuple[str, str, str]:
    """(display name, address, envelope sender) of the From setting: the same for every
    message, parsed once."""
    from_name, from_addr = parseaddr(from_header)
    return from_name, from_addr, envelope_address(envelope_sender(from_header))


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
    headers: Mapping[str, str] | None = None,
) -> tuple[Message, Envelope]:
    """The message and its envelope; CR/LF in any header value is a `HeaderInjection`.

    An ASCII envelope (the usual case) is built with the legacy `email.mime` classes: the
    header registry of `EmailMessage` cost ~10 ms of CPU per message, most of a worker's CPU
    in the benchmark (issue 16); non-ASCII names and subjects become RFC 2047 encoded-words
    there too. A message that needs SMTPUTF8 (raw UTF-8 addresses) uses `EmailMessage`.
    `headers`: more ASCII headers (List-Unsubscribe, feedback/unsubscribe.py)."""
    _single_line("subject", rendered.subject)
    for name, value in (headers or {}).items():
        _single_line(name, value)
        if not (name.isascii() and value.isascii()):
            raise HeaderInjection(f"header {name} is not ASCII")
    from_name, from_addr, sender = _from_setting(from_header)
    recipients = tuple(envelope_address(a) for a in (to, *cc))
    smtputf8 = not all(a.isascii() for a in (sender, *recipients))
    if reply_to and not ascii_domain(reply_to)[0].isascii():
        smtputf8 = True
    envelope = Envelope(sender=sender, recipients=recipients, smtputf8=smtputf8)
    build = _build_utf8 if smtputf8 else _build_ascii
    msg = build(
        rendered,
        message_id=message_id,
        sender=(from_addr or from_header, from_name or None),
        to=(to, to_name),
        cc=cc,
        reply_to=reply_to,
        date=date,
        lang=lang,
    )
    for name, value in (headers or {}).items():
        msg[name] = value
    return msg, envelope


def _build_utf8(
    rendered: Rendered,
    *,
    message_id: str,
    sender: tuple[str, str | None],
    to: tuple[str, str | None],
    cc: Sequence[str],
    reply_to: str | None,
    date: datetime,
    lang: str,
) -> EmailMessage:
    msg = EmailMessage()
    try:
        msg["Message-ID"] = message_id
        msg["Date"] = format_datetime(date)
        msg["From"] = _address(*sender)
        msg["To"] = _address(*to)
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
    return msg


def _formatted(addr: str, name: str | None = None) -> str:
    """`Name <local@a-label>` in ASCII: a non-ASCII name as an encoded-word."""
    _single_line("address", addr)
    _single_line("display name", name)
    local, domain = ascii_domain(addr)
    return formataddr((name or "", f"{local}@{domain}"), charset="utf-8")


#: RFC 5322 §2.1.1: a line of a message is at most 998 characters; 7bit only below this.
SEVEN_BIT_MAX_LINE = 900


def _text_part(text: str, subtype: str) -> MIMEText:
    if text.isascii() and all(len(line) <= SEVEN_BIT_MAX_LINE for line in text.splitlines()):
        return MIMEText(text, subtype, "us-ascii")
    utf8 = Charset("utf-8")
    utf8.body_encoding = QP  # readable, and no longer than base64 for mostly-Latin text
    return MIMEText(text, subtype, utf8)  # type: ignore[arg-type]


def _build_ascii(
    rendered: Rendered,
    *,
    message_id: str,
    sender: tuple[str, str | None],
    to: tuple[str, str | None],
    cc: Sequence[str],
    reply_to: str | None,
    date: datetime,
    lang: str,
) -> Message:
    # The boundary cannot occur in the parts: "=" is encoded in quoted-printable, and a 7bit
    # part would need this random line.
    msg = MIMEMultipart("alternative", boundary=f"==_{uuid.uuid4().hex}_==")
    msg["Message-ID"] = message_id
    msg["Date"] = format_datetime(date)
    msg["From"] = _formatted(*sender)
    msg["To"] = _formatted(*to)
    if cc:
        msg["Cc"] = ", ".join(_formatted(a) for a in cc)
    if reply_to:
        msg["Reply-To"] = _formatted(reply_to)
    subject = rendered.subject
    # A Header object: the generator folds it (a str with its own newlines would not be).
    msg["Subject"] = subject if subject.isascii() else Header(subject, "utf-8")  # type: ignore[assignment]
    msg["Content-Language"] = lang
    msg.attach(_text_part(rendered.text, "plain"))
    msg.attach(_text_part(rendered.html, "html"))
    return msg
