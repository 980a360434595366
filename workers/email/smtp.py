"""One SMTP transaction with aiosmtplib, in phases, and what its outcome means.

The transaction is driven step by step (MAIL, RCPT per recipient, DATA) instead of
`send_message`, for two reasons:
- nothing is delivered before the server answers DATA, so `before_data` can record "sending"
  at the last moment: a crash earlier leaves the email plainly unsent (safe to send again);
- RCPT replies are seen one by one: the primary recipient refused aborts the transaction
  (nobody gets it), a copy refused while the primary is accepted is a partial delivery whose
  refusals are reported (aiosmtplib's `send_message` returns them instead of raising).
The connection comes from the process's pool (pool.py) and goes back to it when the server's
replies leave it in a known state (`SmtpFailure.reusable`).

Outcomes: `Accepted` (the server took responsibility: 250 to DATA); `SmtpRejected` (a 5xx reply,
or a misconfiguration such as STARTTLS not offered: retrying cannot help); `SmtpDeferred` (a
4xx reply, connection refused, timeout or disconnect before DATA: nothing was delivered, retry);
`SmtpOutcomeUnknown` (the connection failed while DATA was in flight: the server may or may not
have accepted the message; SMTP offers no way to ask afterwards, RFC 5321 §6.1).
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiosmtplib

from .message import Envelope

if TYPE_CHECKING:
    from .settings import EmailSettings


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    security: str = "plain"  # plain | starttls | tls
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0
    validate_certs: bool = True
    #: EHLO name; resolved once per process (aiosmtplib otherwise runs `getfqdn` in a new
    #: thread on every connection).
    local_hostname: str | None = None

    @classmethod
    def from_settings(cls, settings: EmailSettings) -> SmtpConfig:
        password = settings.smtp_password.get_secret_value() if settings.smtp_password else None
        return cls(
            host=settings.smtp_host,
            port=settings.smtp_port,
            security=settings.smtp_security,
            username=settings.smtp_username,
            password=password,
            timeout_s=settings.smtp_timeout_s,
            validate_certs=settings.smtp_validate_certs,
            local_hostname=socket.getfqdn(),
        )


@dataclass(frozen=True)
class Accepted:
    reply: str
    #: Copies the server refused while accepting the primary recipient: {address: "550 ..."}.
    refused: dict[str, str]


class SmtpFailure(Exception):
    def __init__(
        self,
        reason: str,
        *,
        stage: str,
        code: int | None = None,
        recipient: str | None = None,
        error_code: str | None = None,
        reusable: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stage = stage
        self.code = code
        self.recipient = recipient
        self._error_code = error_code
        #: The connection is in a known state after it (the server replied): back to the pool.
        self.reusable = reusable

    @property
    def error_code(self) -> str:
        if self._error_code:
            return self._error_code
        return f"SMTP_{self.code}" if self.code else f"SMTP_{self.stage.upper()}"


class SmtpRejected(SmtpFailure):
    """A 5xx reply or a configuration the server cannot serve: permanent."""


class SmtpDeferred(SmtpFailure):
    """A 4xx reply or a network failure before DATA: nothing delivered, try again later."""


class SmtpOutcomeUnknown(SmtpFailure):
    """The connection was lost while DATA was in flight: accepted or not, nobody can tell."""


def _reply(code: int, message: str) -> str:
    return f"{code} {' '.join(message.split())}".strip()


def _classify(
    exc: aiosmtplib.SMTPResponseException, stage: str, recipient: str | None = None
) -> SmtpFailure:
    kind = SmtpRejected if 500 <= exc.code < 600 else SmtpDeferred
    # 421: the server is closing the connection (RFC 5321 §3.8), whatever the command.
    return kind(
        _reply(exc.code, exc.message),
        stage=stage,
        code=exc.code,
        recipient=recipient,
        reusable=exc.code != 421,
    )


def client_for(config: SmtpConfig) -> aiosmtplib.SMTP:
    return aiosmtplib.SMTP(
        hostname=config.host,
        port=config.port,
        username=config.username,
        password=config.password,
        timeout=config.timeout_s,
        local_hostname=config.local_hostname,
        use_tls=config.security == "tls",
        start_tls=config.security == "starttls",  # False: never, not even opportunistic
        validate_certs=config.validate_certs,
    )


SMTPUTF8_NOT_SUPPORTED = "SMTPUTF8_NOT_SUPPORTED"


async def _mail_options(
    client: aiosmtplib.SMTP, config: SmtpConfig, envelope: Envelope
) -> tuple[list[str], str]:
    """MAIL FROM options and the command encoding: SMTPUTF8 when an address needs it and the
    server offers it (RFC 6531 §3.4); a server without it can never take such an address."""
    if not envelope.smtputf8:
        return [], "ascii"
    if client.is_ehlo_or_helo_needed:
        await client.ehlo()
    if not client.supports_extension("smtputf8"):
        raise SmtpRejected(
            f"{config.host}:{config.port} does not offer SMTPUTF8, needed by a non-ASCII local "
            f"part in {', '.join(a for a in (envelope.sender, *envelope.recipients) if not a.isascii())}",
            stage="mail",
            error_code=SMTPUTF8_NOT_SUPPORTED,
            reusable=True,
        )
    return ["SMTPUTF8"], "utf-8"


async def connect(config: SmtpConfig) -> aiosmtplib.SMTP:
    """A new connection, greeted; `SmtpDeferred` (or `SmtpRejected` for a TLS setting the
    server cannot serve) when it cannot be opened."""
    client = client_for(config)
    try:
        await client.connect()
    except aiosmtplib.SMTPResponseException as exc:
        client.close()
        raise _classify(exc, "connect") from None
    except aiosmtplib.SMTPNotSupported as exc:
        client.close()
        raise SmtpRejected(f"{config.host}:{config.port}: {exc}", stage="tls") from None
    except (aiosmtplib.SMTPException, OSError) as exc:
        client.close()
        raise SmtpDeferred(f"{type(exc).__name__}: {exc}", stage="connect") from None
    return client


class StaleConnection(Exception):
    """A pooled connection the server had closed: nothing was sent on it, open another."""


async def begin(
    client: aiosmtplib.SMTP, config: SmtpConfig, envelope: Envelope, *, reused: bool
) -> dict[str, str]:
    """MAIL and RCPT; returns the copies refused while the primary recipient was accepted.
    On a reused connection, a first command that finds it closed is a `StaleConnection`."""
    stage = "mail"
    try:
        try:
            options, encoding = await _mail_options(client, config, envelope)
            await client.mail(envelope.sender, options=options, encoding=encoding)
        except (aiosmtplib.SMTPServerDisconnected, ConnectionError) as exc:
            if reused:
                raise StaleConnection(str(exc)) from None
            raise
        except aiosmtplib.SMTPResponseException as exc:
            if reused and exc.code == 421:  # an idle timeout the server announced
                raise StaleConnection(str(exc)) from None
            raise
        refused: dict[str, str] = {}
        stage = "rcpt"
        for index, recipient in enumerate(envelope.recipients):
            try:
                await client.rcpt(recipient, encoding=encoding)
            except aiosmtplib.SMTPRecipientRefused as exc:
                if index == 0:
                    raise _classify(exc, "rcpt", recipient) from None
                refused[recipient] = _reply(exc.code, exc.message)
        return refused
    except aiosmtplib.SMTPResponseException as exc:
        raise _classify(exc, stage) from None
    except (aiosmtplib.SMTPException, OSError) as exc:
        raise SmtpDeferred(f"{type(exc).__name__}: {exc}", stage=stage) from None


async def send_data(client: aiosmtplib.SMTP, content: bytes) -> str:
    """DATA; the server's reply when it accepted the message."""
    try:
        response = await client.data(content)
    except aiosmtplib.SMTPResponseException as exc:
        # A reply: definitely not accepted, and the transaction is over (the connection is fine).
        raise _classify(exc, "data") from None
    except (aiosmtplib.SMTPException, OSError) as exc:
        raise SmtpOutcomeUnknown(f"{type(exc).__name__} during DATA: {exc}", stage="data") from None
    return _reply(response.code, response.message)


async def reset(client: aiosmtplib.SMTP) -> bool:
    """RSET after an aborted transaction; False when the connection is not fit for reuse."""
    if not client.is_connected:
        return False
    try:
        await client.rset()
    except (aiosmtplib.SMTPException, OSError):
        return False
    return True


async def close(client: aiosmtplib.SMTP, *, polite: bool) -> None:
    if polite and client.is_connected:
        with contextlib.suppress(aiosmtplib.SMTPException, OSError):
            await client.quit()
    if client.is_connected:
        client.close()
