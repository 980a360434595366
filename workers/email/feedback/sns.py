"""Amazon SES events through SNS: Delivery, Bounce and Complaint onto the states of the DSN path.

An SNS HTTP(S) subscription POSTs JSON; its signature is verified before anything is read:
- `SigningCertURL` must be `https://<host>/...pem` with a host on `EMAIL_SNS_CERT_HOSTS`
  (default `sns.*.amazonaws.com`, `*` standing for one DNS label: `sns.x.s3.amazonaws.com`, an
  S3 bucket anyone can create, does not match). The certificate is fetched through the
  injectable `fetch` (tests serve one they generate) and cached per URL.
- `SignatureVersion` 1: SHA1withRSA, 2: SHA256withRSA, over the string SNS signs (the message's
  fields in its order, `name\\nvalue\\n` each).
- replays are refused: a `MessageId` seen before (`email_provider_events`), or a `Timestamp`
  older than `EMAIL_SNS_MAX_AGE_S`.
Anything else (no signature, a bad one, another host) is refused (`Refused`: 401) and logged.

A SubscriptionConfirmation is confirmed by fetching its SubscribeURL (on an allowed host too).
A Notification's Message is SES's event: `mail.source` is our VERP envelope sender (the email,
signed; tokens.py), else `mail.commonHeaders.messageId` is our Message-ID.
- Delivery: `delivered_at` set (the row stays SENT).
- Bounce, `bounceType` Permanent: BOUNCED with SES's diagnostic, the address suppressed (as a
  DSN, bounces.py); Transient/Undetermined: nothing changes.
- Complaint: the address suppressed (`COMPLAINED`: its sequences stop).
"""

from __future__ import annotations

import base64
import json
import re
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import psycopg
import structlog
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .. import sequences
from . import tokens
from .tracking import EVENTS

log = structlog.get_logger("jobfleet.email.feedback")

COMPLAINED = "COMPLAINED"
Fetch = Callable[[str], bytes]
_NOTIFICATION = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
_CONFIRMATION = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")


class Refused(Exception):
    """Not a genuine, fresh SNS message: 401."""


def fetch_https(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return bytes(response.read())


def host_allowed(url: str, patterns: list[str]) -> bool:
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.port not in (None, 443) or not parts.hostname:
        return False
    for pattern in patterns:
        regex = "".join("[a-z0-9-]+" if c == "*" else re.escape(c) for c in pattern.lower())
        if re.fullmatch(regex, parts.hostname.lower()):
            return True
    return False


def string_to_sign(message: dict[str, Any]) -> bytes:
    fields = _NOTIFICATION if message.get("Type") == "Notification" else _CONFIRMATION
    return "".join(
        f"{name}\n{message[name]}\n" for name in fields if message.get(name) is not None
    ).encode()


class Verifier:
    def __init__(self, hosts: list[str], max_age_s: float, fetch: Fetch = fetch_https) -> None:
        self.hosts = hosts
        self.max_age = timedelta(seconds=max_age_s)
        self.fetch = fetch
        self._certs: dict[str, x509.Certificate] = {}

    def verify(self, message: dict[str, Any], now: datetime) -> None:
        """`Refused` unless `message` is signed by SNS and recent."""
        version = message.get("SignatureVersion")
        if not message.get("Signature") or version not in ("1", "2"):
            raise Refused(f"unsigned (SignatureVersion {version!r})")
        url = str(message.get("SigningCertURL") or "")
        if not host_allowed(url, self.hosts) or not urlsplit(url).path.endswith(".pem"):
            raise Refused(f"certificate URL not allowed: {url!r}")
        cert = self._cert(url, now)
        key = cert.public_key()
        if not isinstance(key, rsa.RSAPublicKey):
            raise Refused("not an RSA certificate")
        algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
        try:
            signature = base64.b64decode(str(message["Signature"]), validate=True)
            key.verify(signature, string_to_sign(message), padding.PKCS1v15(), algorithm)
        except (InvalidSignature, ValueError, KeyError):
            raise Refused("bad signature") from None
        try:
            stamp = datetime.fromisoformat(str(message["Timestamp"]).replace("Z", "+00:00"))
        except (KeyError, ValueError):
            raise Refused("no Timestamp") from None
        if now - stamp > self.max_age:
            raise Refused(f"too old: {message['Timestamp']} (replay window {self.max_age})")

    def _cert(self, url: str, now: datetime) -> x509.Certificate:
        cert = self._certs.get(url)
        if cert is None:
            try:
                cert = x509.load_pem_x509_certificate(self.fetch(url))
            except Exception as exc:
                raise Refused(f"certificate {url}: {type(exc).__name__}: {exc}") from None
            self._certs[url] = cert
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise Refused("the signing certificate is not valid now")
        return cert


def first_seen(conn: psycopg.Connection[Any], message: dict[str, Any], now: datetime) -> bool:
    """Record the SNS MessageId; False when it was seen before (a replay)."""
    found = conn.execute(
        "INSERT INTO email_provider_events (provider, message_id, kind, received_at)"
        " VALUES ('ses', %s, %s, %s) ON CONFLICT DO NOTHING RETURNING message_id",
        (str(message.get("MessageId")), str(message.get("Type")), now),
    ).fetchone()
    return found is not None


def apply_ses_event(
    conn: psycopg.Connection[Any], key: bytes, event: dict[str, Any], now: datetime
) -> str:
    """Apply one SES event (the Notification's Message); returns what it did."""
    kind = event.get("notificationType") or event.get("eventType") or ""
    mail = event.get("mail") or {}
    found = _email_of(conn, key, mail)
    if found is None:
        return f"{kind}: no such email"
    email_id, org_id, recipient = found
    if kind == "Delivery":
        conn.execute(
            "UPDATE scheduled_emails SET delivered_at = COALESCE(delivered_at, %s),"
            " updated_at = %s WHERE id = %s",
            (now, now, email_id),
        )
        return "delivered"
    if kind == "Bounce":
        bounce = event.get("bounce") or {}
        if bounce.get("bounceType") != "Permanent":
            return f"bounce {bounce.get('bounceType')}: nothing changes"
        for who in bounce.get("bouncedRecipients") or [{"emailAddress": recipient}]:
            address = str(who.get("emailAddress") or recipient)
            detail = str(who.get("diagnosticCode") or bounce.get("bounceSubType") or "bounce")
            status = str(who.get("status") or "5.0.0")
            if address.lower() == recipient.lower():
                conn.execute(
                    "UPDATE scheduled_emails SET status = 'BOUNCED', error_code = %s, error = %s,"
                    " bounced_at = COALESCE(bounced_at, %s), updated_at = %s WHERE id = %s",
                    (f"SES_{status}"[:64], detail, now, now, email_id),
                )
                EVENTS.labels(event="bounce").inc()
            sequences.suppress(
                conn, org_id, address, reason=sequences.BOUNCED, now=now, detail=detail
            )
        return "bounced"
    if kind == "Complaint":
        complaint = event.get("complaint") or {}
        for who in complaint.get("complainedRecipients") or [{"emailAddress": recipient}]:
            address = str(who.get("emailAddress") or recipient)
            detail = str(complaint.get("complaintFeedbackType") or "complaint")
            sequences.suppress(conn, org_id, address, reason=COMPLAINED, now=now, detail=detail)
        EVENTS.labels(event="complaint").inc()
        return "complained"
    return f"{kind}: ignored"


def _email_of(
    conn: psycopg.Connection[Any], key: bytes, mail: dict[str, Any]
) -> tuple[Any, Any, str] | None:
    try:
        email_id = tokens.verp_email_id(key, str(mail.get("source") or ""))
        row = conn.execute(
            "SELECT id, org_id, recipient_email FROM scheduled_emails WHERE id = %s FOR UPDATE",
            (email_id,),
        ).fetchone()
    except tokens.BadToken:
        message_id = (mail.get("commonHeaders") or {}).get("messageId")
        row = conn.execute(
            "SELECT id, org_id, recipient_email FROM scheduled_emails WHERE message_id = %s"
            " ORDER BY created_at DESC LIMIT 1 FOR UPDATE",
            (message_id,),
        ).fetchone()
    return (row[0], row[1], row[2]) if row else None


def handle(
    conn: psycopg.Connection[Any],
    verifier: Verifier,
    key: bytes,
    body: bytes,
    now: datetime,
) -> str:
    """One SNS POST: `Refused` (401) or what it did."""
    try:
        message = json.loads(body)
        assert isinstance(message, dict)
    except (ValueError, AssertionError):
        raise Refused("not a JSON object") from None
    verifier.verify(message, now)
    if not first_seen(conn, message, now):
        raise Refused(f"replayed MessageId {message.get('MessageId')}")
    kind = message.get("Type")
    if kind == "SubscriptionConfirmation":
        url = str(message.get("SubscribeURL") or "")
        if not host_allowed(url, verifier.hosts):
            raise Refused(f"SubscribeURL not allowed: {url!r}")
        verifier.fetch(url)
        log.info("email.sns_subscribed", topic=message.get("TopicArn"))
        return "subscribed"
    if kind != "Notification":
        return f"{kind}: ignored"
    try:
        event = json.loads(str(message.get("Message")))
    except ValueError:
        return "not an SES event"
    return apply_ses_event(conn, key, event, now) if isinstance(event, dict) else "ignored"
