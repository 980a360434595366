"""The composition root of the email domain: the collaborators its functions take, built once
per process on first use (never at import time); tests install their own with `set_mailer`.
`Mailer.settings` are the domain's (`EmailSettings`); the kernel's stay on the runtime."""

from __future__ import annotations

import atexit
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from shared.runtime import Runtime, get_runtime

from .deferral import DeferralPolicy
from .pool import SmtpPool
from .settings import EmailSettings, email_settings
from .smtp import Accepted, SmtpConfig
from .templates import Templates

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from shared.jobs.send import SendResult
    from workers.email.contracts import EmailSendV1


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Mailer:
    settings: EmailSettings
    #: VAR_DIR (the kernel's): where the machine's feedback key is kept without EMAIL_FEEDBACK_KEY.
    var_dir: str
    pool: ConnectionPool
    templates: Templates
    smtp: SmtpConfig
    send_job: Callable[[EmailSendV1], SendResult]
    deferral: DeferralPolicy = field(default_factory=DeferralPolicy)
    clock: Callable[[], datetime] = utcnow
    #: `(config, content, envelope, *, before_data) -> Accepted`: the pool's `send`.
    transport: Callable[..., Accepted] = field(default=None)  # type: ignore[assignment]
    rng: random.Random = field(default_factory=random.Random)
    smtp_pool: SmtpPool | None = None

    def __post_init__(self) -> None:
        if self.transport is None:
            self.smtp_pool = self.smtp_pool or SmtpPool.from_settings(self.settings)
            self.transport = self.smtp_pool.send

    def close(self) -> None:
        """Close the pooled SMTP connections (QUIT)."""
        if self.smtp_pool is not None:
            self.smtp_pool.close()

    @cached_property
    def feedback_key(self) -> bytes:
        """The key of the feedback tokens (unsubscribe links): feedback/tokens.py."""
        from .feedback.tokens import feedback_key

        return feedback_key(self.settings, self.var_dir)

    @property
    def sending_grace_s(self) -> float:
        """How long a SENDING row may belong to a live attempt (connect + DATA timeouts)."""
        return 2 * self.smtp.timeout_s + 1


def build_mailer(
    runtime: Runtime, settings: EmailSettings | None = None, **overrides: Any
) -> Mailer:
    """The mailer of `runtime` with the email settings (default: the process's)."""
    from shared.jobs import catalog

    settings = settings or email_settings()

    def send_job(payload: EmailSendV1) -> SendResult:
        return runtime.sender.send(catalog.EMAIL_SEND, payload)

    parts: dict[str, Any] = {
        "settings": settings,
        "var_dir": runtime.settings.var_dir,
        "pool": runtime.pool,
        "templates": Templates(product_name=settings.product_name),
        "smtp": SmtpConfig.from_settings(settings),
        "deferral": DeferralPolicy.from_settings(settings),
        "send_job": send_job,
    }
    parts.update(overrides)
    return Mailer(**parts)


_lock = threading.Lock()
_mailer: Mailer | None = None


def get_mailer() -> Mailer:
    global _mailer
    if _mailer is None:
        with _lock:
            if _mailer is None:
                _mailer = build_mailer(get_runtime())
                atexit.register(_mailer.close)  # QUIT on the pooled connections
    return _mailer


def set_mailer(mailer: Mailer | None) -> Mailer | None:
    global _mailer
    with _lock:
        previous, _mailer = _mailer, mailer
    return previous
