"""Who is asking, and is this POST really from the console's own page?

- Auth: `Authorization: Bearer <CONSOLE_TOKEN>`, basic auth (`CONSOLE_USER`/`CONSOLE_PASSWORD`),
  or the session cookie the login form sets after a correct token (an HMAC of the identity, not
  the token). Without auth configured (loopback only, see settings.check_bind) every request is
  the local operator, but the Host header must then be a loopback name (no DNS rebinding).
- CSRF: every mutation is a POST carrying `csrf` (form field or `X-CSRF-Token` header) equal to
  an HMAC of the operator's identity under the console's secret; a POST whose `Origin` is not
  this console is refused as well.
"""

from __future__ import annotations

import base64
import binascii
import getpass
import hashlib
import hmac
import os
import socket
from dataclasses import dataclass
from uuid import UUID

from fastapi import HTTPException, Request

from .settings import ConsoleSettings, is_loopback

SESSION_COOKIE = "console_session"


@dataclass(frozen=True)
class Operator:
    """The caller: a name for the audit, and the orgs it may see (empty: every org)."""

    name: str
    orgs: tuple[UUID, ...] = ()
    #: False for the local operator of a console without auth (on loopback): nothing to log out of.
    authenticated: bool = True

    @property
    def restricted(self) -> bool:
        return bool(self.orgs)

    def may_see(self, org_id: UUID) -> bool:
        return not self.orgs or org_id in self.orgs


def local_operator() -> str:
    try:
        user = os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()} (console, no auth)"


class Guard:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        secret = settings.secret.get_secret_value() if settings.secret else None
        self._key = secret.encode() if secret else os.urandom(32)

    def _sign(self, purpose: str, value: str) -> str:
        mac = hmac.new(self._key, f"{purpose}\0{value}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")

    # -- identity --------------------------------------------------------------------------

    def operator(self, request: Request) -> Operator:
        """The caller, or 401 (basic-auth challenge when credentials are configured)."""
        s = self.settings
        orgs = tuple(s.orgs)
        if not s.auth_configured:
            host = (request.headers.get("host") or "").rsplit(":", 1)[0]
            if not is_loopback(host):
                raise HTTPException(403, "the console without auth answers on loopback only")
            return Operator(local_operator(), orgs, authenticated=False)
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and s.token is not None:
            if hmac.compare_digest(value.strip().encode(), s.token.get_secret_value().encode()):
                return Operator(s.token_operator, orgs)
        elif scheme.lower() == "basic" and s.user is not None and s.password is not None:
            user, password = _basic(value)
            if hmac.compare_digest(user.encode(), s.user.encode()) and hmac.compare_digest(
                password.encode(), s.password.get_secret_value().encode()
            ):
                return Operator(user, orgs)
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie and s.token is not None and hmac.compare_digest(cookie, self.session_cookie()):
            return Operator(s.token_operator, orgs)
        challenge = {"WWW-Authenticate": 'Basic realm="jobfleet console"'} if s.user else {}
        raise HTTPException(401, "authentication required", headers=challenge)

    def login(self, token: str) -> str | None:
        """The session cookie for a correct token, else None."""
        expected = self.settings.token
        if expected is None or not hmac.compare_digest(
            token.encode(), expected.get_secret_value().encode()
        ):
            return None
        return self.session_cookie()

    def session_cookie(self) -> str:
        assert self.settings.token is not None
        return self._sign("session", self.settings.token.get_secret_value())

    # -- CSRF ------------------------------------------------------------------------------

    def csrf_token(self, operator: Operator) -> str:
        return self._sign("csrf", operator.name)

    def check_csrf(self, request: Request, operator: Operator, sent: str | None) -> None:
        origin = request.headers.get("origin")
        if origin and origin != "null":
            host = request.headers.get("host", "")
            if origin.split("://", 1)[-1] != host:
                raise HTTPException(403, f"cross-origin POST refused (Origin {origin})")
        sent = sent or request.headers.get("x-csrf-token")
        if not sent or not hmac.compare_digest(sent, self.csrf_token(operator)):
            raise HTTPException(403, "missing or invalid CSRF token")


def _basic(value: str) -> tuple[str, str]:
    try:
        user, _, password = base64.b64decode(value.strip()).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return "", ""
    return user, password
