"""HMAC-signed expiring links of the local backend (S3 has presigned URLs of its own).

A link is `{base}/{key}?expires={unix}&sig={hex}` (and `filename=` when set): the signature is
HMAC-SHA256 over bucket, key, expiry and filename, under a secret key. Verification takes the
clock as a parameter and compares in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from .backend import InvalidLink, LinkExpired, check_key


@dataclass(frozen=True)
class LinkRequest:
    """What a link asks for once its signature and expiry are checked."""

    key: str
    filename: str | None


def signature(secret: bytes, bucket: str, key: str, expires: int, filename: str | None) -> str:
    message = "\n".join((bucket, key, str(expires), filename or "")).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def sign(
    base_url: str,
    secret: bytes,
    bucket: str,
    key: str,
    *,
    expires: int,
    filename: str | None = None,
) -> str:
    query = {
        "expires": str(expires),
        "sig": signature(secret, bucket, check_key(key), expires, filename),
    }
    if filename:
        query["filename"] = filename
    return f"{base_url.rstrip('/')}/{quote(key)}?{urlencode(query)}"


def verify(
    path: str, query: str, secret: bytes, bucket: str, *, now: float, prefix: str = ""
) -> LinkRequest:
    """Check the path (after `prefix`) and query of a link; raise `InvalidLink`/`LinkExpired`."""
    if not path.startswith(prefix):
        raise InvalidLink("link path outside the links prefix")
    key = check_key(unquote(path[len(prefix) :].lstrip("/")))
    params = parse_qs(query, keep_blank_values=True)
    try:
        expires = int(params["expires"][0])
        sig = params["sig"][0]
    except (KeyError, ValueError, IndexError):
        raise InvalidLink("link lacks a valid expires or sig") from None
    filename = params.get("filename", [None])[0]
    expected = signature(secret, bucket, key, expires, filename)
    if not hmac.compare_digest(expected, sig):
        raise InvalidLink("link signature does not match")
    if now >= expires:
        raise LinkExpired(f"link expired at {expires}")
    return LinkRequest(key, filename)


def verify_url(url: str, base_url: str, secret: bytes, bucket: str, *, now: float) -> LinkRequest:
    """`verify` for a full URL made by `sign` with `base_url`."""
    parts, base = urlsplit(url), urlsplit(base_url)
    if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
        raise InvalidLink("link does not point at this server")
    return verify(parts.path, parts.query, secret, bucket, now=now, prefix=base.path.rstrip("/"))
