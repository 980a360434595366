"""Signed, expiring tokens that name one email: `<payload>.<signature>`, both base64url.

The payload is `<email id hex>.<org id hex>.<expiry, unix seconds, base 36>`; the signature is
HMAC-SHA256 under a key derived from the feedback key and the token's purpose (an unsubscribe
token is no VERP token), truncated to 128 bits. Only ASCII letters, digits, `-` and `_`: the
token goes into URL paths and local parts as is.

The key: `EMAIL_FEEDBACK_KEY`, else a random key written once under `VAR_DIR` (every process of
one machine shares it; a fleet on several machines sets the setting).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    from ..settings import EmailSettings

SIGNATURE_BYTES = 16


class BadToken(ValueError):
    """Not a token this fleet signed (forged, truncated, another purpose)."""


class ExpiredToken(BadToken):
    """A genuine token past its expiry."""


@dataclass(frozen=True)
class EmailRef:
    email_id: UUID
    org_id: UUID
    expires: int  # unix seconds


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _purpose_key(key: bytes, purpose: str) -> bytes:
    return hmac.new(key, f"jobfleet-email-{purpose}".encode(), hashlib.sha256).digest()


def sign(key: bytes, purpose: str, email_id: UUID, org_id: UUID, expires: datetime) -> str:
    body = f"{email_id.hex}.{org_id.hex}.{_base36(int(expires.timestamp()))}".encode()
    mac = hmac.new(_purpose_key(key, purpose), body, hashlib.sha256).digest()[:SIGNATURE_BYTES]
    return f"{_b64(body)}.{_b64(mac)}"


def verify(key: bytes, purpose: str, token: str, now: datetime) -> EmailRef:
    """The email the token names; `BadToken` when forged, `ExpiredToken` when expired."""
    try:
        body_b64, mac_b64 = token.split(".")
        body, mac = _unb64(body_b64), _unb64(mac_b64)
    except (ValueError, TypeError):
        raise BadToken("malformed token") from None
    expected = hmac.new(_purpose_key(key, purpose), body, hashlib.sha256).digest()
    if not hmac.compare_digest(mac, expected[:SIGNATURE_BYTES]):
        raise BadToken("bad signature")
    try:
        email_hex, org_hex, expiry = body.decode("ascii").split(".")
        ref = EmailRef(UUID(hex=email_hex), UUID(hex=org_hex), int(expiry, 36))
    except (ValueError, UnicodeDecodeError):
        raise BadToken("malformed payload") from None
    if ref.expires < now.timestamp():
        raise ExpiredToken(f"expired at {ref.expires}")
    return ref


VERP_PREFIX = "bounces+"
VERP_SIGNATURE_BYTES = 10


def verp_token(key: bytes, email_id: UUID) -> str:
    """The VERP tag of an email: base32 (lower case: local parts may be case-folded on the way
    back) of its id and an 80-bit signature, 42 characters; `bounces+` + it fits the 64 octets
    of a local part (RFC 5321 §4.5.3.1.1). No expiry: a DSN can come days later."""
    mac = hmac.new(_purpose_key(key, "verp"), email_id.bytes, hashlib.sha256).digest()
    raw = email_id.bytes + mac[:VERP_SIGNATURE_BYTES]
    return base64.b32encode(raw).decode("ascii").rstrip("=").lower()


def verp_address(key: bytes, email_id: UUID, domain: str) -> str:
    return f"{VERP_PREFIX}{verp_token(key, email_id)}@{domain}"


def verp_email_id(key: bytes, address: str) -> UUID:
    """The email a VERP address names; `BadToken` when it is not one this fleet signed."""
    local = address.rpartition("@")[0] if "@" in address else address
    if not local.lower().startswith(VERP_PREFIX):
        raise BadToken("not a VERP address")
    tag = local[len(VERP_PREFIX) :].upper()
    try:
        raw = base64.b32decode(tag + "=" * (-len(tag) % 8))
    except ValueError:
        raise BadToken("malformed VERP tag") from None
    if len(raw) != 16 + VERP_SIGNATURE_BYTES:
        raise BadToken("malformed VERP tag")
    email_id = UUID(bytes=raw[:16])
    expected = hmac.new(_purpose_key(key, "verp"), raw[:16], hashlib.sha256).digest()
    if not hmac.compare_digest(raw[16:], expected[:VERP_SIGNATURE_BYTES]):
        raise BadToken("bad VERP signature")
    return email_id


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def feedback_key(settings: EmailSettings, var_dir: str | Path) -> bytes:
    """`EMAIL_FEEDBACK_KEY`, else the machine's random key under `var_dir` (`VAR_DIR`, created
    once)."""
    if settings.feedback_key is not None:
        return settings.feedback_key.get_secret_value().encode()
    path = Path(var_dir) / "email-feedback.key"
    if not path.exists():  # written whole, then linked: a concurrent reader never sees it empty
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_hex(32).encode())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process was first: its key is the machine's
        finally:
            tmp.unlink()
    return path.read_bytes().strip()
