"""The console's settings (`CONSOLE_*` environment variables; see docs/console.md).

Off loopback the console refuses to start without auth: a bearer token (`CONSOLE_TOKEN`, also
accepted once by the login form, which then sets a session cookie) or basic-auth credentials
(`CONSOLE_USER` / `CONSOLE_PASSWORD`). `CONSOLE_ORGS` restricts the console to some tenants:
every run, dead letter, outbox event and tenant panel shown or acted on is of those orgs, and the
fleet-wide actions (pause a queue, a periodic job, purge) are refused.
"""

from __future__ import annotations

import ipaddress

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..config import UuidList


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CONSOLE_", env_file=".env", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Interface the console listens on")
    port: int = Field(default=8190, description="Port of the console (`fleet web`, `make run`)")
    token: SecretStr | None = Field(default=None, description="Bearer token of the operators")
    token_operator: str = Field(
        default="token", description="Who actions done with CONSOLE_TOKEN are audited as"
    )
    user: str | None = Field(default=None, description="Basic-auth user (audited as its name)")
    password: SecretStr | None = Field(default=None, description="Basic-auth password")
    orgs: UuidList = Field(
        default_factory=list,
        description="Restrict the console to these orgs (comma-separated; empty: every org)",
    )
    secret: SecretStr | None = Field(
        default=None,
        description="Key of the CSRF tokens and session cookies (default: random per start)",
    )
    refresh_s: float = Field(default=2.0, description="Overview auto-refresh period (htmx poll)")

    @property
    def auth_configured(self) -> bool:
        return self.token is not None or (self.user is not None and self.password is not None)


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class UnsafeBind(RuntimeError):
    """The console would listen off loopback without auth."""


def check_bind(settings: ConsoleSettings) -> None:
    """Refuse an unauthenticated console on anything but loopback (an operator's console can
    replay and purge jobs of every tenant)."""
    if not is_loopback(settings.host) and not settings.auth_configured:
        raise UnsafeBind(
            f"refusing to serve the console on {settings.host} without auth: set CONSOLE_TOKEN"
            " or CONSOLE_USER and CONSOLE_PASSWORD (or listen on 127.0.0.1)"
        )
