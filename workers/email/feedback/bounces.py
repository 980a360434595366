"""Bounces from delivery status notifications (RFC 3464), sent back to the VERP envelope sender.

Every message leaves with the envelope sender `bounces+<tag>@<EMAIL_BOUNCE_DOMAIN>` (tokens.py:
the email's id, signed), so a DSN names its email by the address it is delivered to, whatever
the reporting MTA copies of the original. The report is parsed with the stdlib `email` package:
`multipart/report; report-type=delivery-status` holds a `message/delivery-status` part that the
parser already splits into its per-message and per-recipient field blocks (Action, Status,
Final-Recipient, Diagnostic-Code). Why not `flufl.bounce`: it recognises many non-standard
bounce formats heuristically, but returns addresses only (no status code, no diagnostic, no
permanent/temporary split, which decides whether to suppress) and would be one more dependency;
the MTAs that relay our mail (Postfix, Exim, every hosted relay) write RFC 3464 reports, and what
is not one is kept for an operator (`email_inbound_kept`), not guessed at.

A recipient block with `Action: failed` and a 5.x.x `Status` is a hard bounce: the email is
BOUNCED with the remote diagnostic (`error_code` `DSN_5.1.1`), and the address suppressed for
the org like a 5xx to RCPT (sequences.suppress). `delayed` and 4.x.x reports change nothing.
"""

from __future__ import annotations

import email
import email.policy
from dataclasses import dataclass
from datetime import datetime
from email.message import Message
from typing import TYPE_CHECKING, Any
from uuid import UUID

import psycopg
import structlog

from .. import sequences
from ..message import ascii_domain, envelope_address, envelope_sender
from . import tokens
from .tracking import EVENTS

if TYPE_CHECKING:
    from .. import store
    from ..settings import EmailSettings

log = structlog.get_logger("jobfleet.email.feedback")


class NotADsn(ValueError):
    """The message is no delivery status notification (or a broken one)."""


def verp_sender(settings: EmailSettings, key: bytes, row: store.EmailRow) -> str:
    domain = settings.bounce_domain or ascii_domain(envelope_sender(settings.from_header))[1]
    return tokens.verp_address(key, row.id, domain)


@dataclass(frozen=True)
class RecipientStatus:
    recipient: str  # the address, without its `rfc822;` type
    action: str  # failed | delayed | delivered | relayed | expanded
    status: str  # 5.1.1
    diagnostic: str  # the remote server's reply, else the status

    @property
    def hard(self) -> bool:
        return self.action == "failed" and self.status.startswith("5.")


def parse_dsn(raw: bytes) -> list[RecipientStatus]:
    """The per-recipient reports of an RFC 3464 DSN; `NotADsn` otherwise."""
    msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    if msg.get_content_type() != "multipart/report":
        raise NotADsn(f"not a report: {msg.get_content_type()}")
    if (msg.get_param("report-type") or "").lower() != "delivery-status":  # type: ignore[union-attr]
        raise NotADsn(f"report-type {msg.get_param('report-type')!r}")
    status_part = next(
        (p for p in msg.walk() if p.get_content_type() == "message/delivery-status"), None
    )
    if status_part is None:
        raise NotADsn("no message/delivery-status part")
    blocks = status_part.get_payload()
    if not isinstance(blocks, list) or len(blocks) < 2:
        raise NotADsn("no per-recipient fields")
    # blocks[0]: the per-message fields
    found = [_recipient(block) for block in blocks[1:] if isinstance(block, Message)]
    if not found:
        raise NotADsn("no per-recipient fields")
    return found


def _recipient(block: Message) -> RecipientStatus:
    recipient = _typed(block.get("Final-Recipient") or block.get("Original-Recipient"))
    action = (block.get("Action") or "").strip().lower()
    status = (block.get("Status") or "").strip().split(" ")[0]
    if not recipient or not action or not status:
        raise NotADsn("a recipient block without Final-Recipient, Action or Status")
    diagnostic = " ".join((_typed(block.get("Diagnostic-Code")) or "").split())
    return RecipientStatus(recipient, action, status, diagnostic or status)


def _typed(value: Any) -> str:
    """`rfc822; a@b` -> `a@b` (the address type of RFC 3464 §2.3.2)."""
    text = " ".join(str(value or "").split())
    return text.split(";", 1)[1].strip() if ";" in text else text


@dataclass(frozen=True)
class Outcome:
    email_id: UUID
    bounced: bool
    suppressed: list[str]


def apply_dsn(
    conn: psycopg.Connection[Any], key: bytes, rcpt: str, raw: bytes, now: datetime
) -> Outcome:
    """Apply the DSN delivered to VERP address `rcpt`. `tokens.BadToken` (not our address),
    `NotADsn` (unparsable), `LookupError` (no such email) leave everything as it was."""
    email_id = tokens.verp_email_id(key, rcpt)
    reports = parse_dsn(raw)
    found = conn.execute(
        "SELECT org_id, recipient_email, cc FROM scheduled_emails WHERE id = %s FOR UPDATE",
        (email_id,),
    ).fetchone()
    if found is None:
        raise LookupError(f"no email {email_id}")
    org_id, primary, cc = found
    ours = {envelope_address(a).lower(): a for a in (primary, *cc)}
    bounced, suppressed = False, []
    for report in reports:
        address = ours.get(report.recipient.lower())
        if address is None or not report.hard:
            log.info("email.dsn_ignored", email_id=str(email_id), action=report.action,
                     status=report.status)  # fmt: skip
            continue
        if address == primary:
            bounced = True
            conn.execute(
                "UPDATE scheduled_emails SET status = 'BOUNCED', error_code = %s, error = %s,"
                " bounced_at = COALESCE(bounced_at, %s), updated_at = %s WHERE id = %s",
                (f"DSN_{report.status}"[:64], report.diagnostic, now, now, email_id),
            )
        sequences.suppress(
            conn, org_id, address, reason=sequences.BOUNCED, now=now, detail=report.diagnostic
        )
        suppressed.append(address)
    if bounced:
        EVENTS.labels(event="bounce").inc()
    log.info("email.dsn", email_id=str(email_id), bounced=bounced, suppressed=len(suppressed))
    return Outcome(email_id, bounced, suppressed)


def keep(conn: psycopg.Connection[Any], mail_from: str, rcpt: str, reason: str, raw: bytes) -> int:
    """Keep an inbound message the listener could not use, for inspection."""
    row = conn.execute(
        "INSERT INTO email_inbound_kept (mail_from, rcpt_to, reason, raw) VALUES (%s, %s, %s, %s)"
        " RETURNING id",
        (mail_from, rcpt, reason[:2000], raw),
    ).fetchone()
    assert row is not None
    return int(row[0])
