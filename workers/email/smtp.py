"""One SMTP transaction with smtplib, in phases, and what its outcome means.

The transaction is driven step by step (MAIL, RCPT per recipient, DATA) instead of
`sendmail`, for two reasons:
- nothing is delivered before the server answers DATA, so `before_data` can record "sending"
  at the last moment: a crash earlier leaves the email plainly unsent (safe to send again);
- RCPT replies are seen one by one: the primary recipient refused aborts the transaction
  (nobody gets it), a copy refused while the primary is accepted is a partial delivery whose
  refusals are reported.
The connection comes from the process's pool (pool.py) and goes back to it when the server's
replies leave it in a known state (`SmtpFailure.reusable`). The calls block the worker thread
that makes them (a socket timeout of `timeout_s` bounds each); the GIL is released while they
wait, so the threads of a process send at once (issue 16: smtplib in the worker thread costs a
third of the CPU of aiosmtplib on an event loop in another thread, with its two thread hand-offs
per email).

Outcomes: `Accepted` (the server took responsibility: 250 to DATA); `SmtpRejected` (a 5xx reply
about the email: retrying cannot help); `SmtpDeferred` (a 4xx reply, connection refused, timeout
or disconnect before DATA: nothing was delivered, retry), and of those `SmtpRelayFault` (the
relay refused this fleet's credentials or TLS setting: a configuration fault, not the email's);
`SmtpOutcomeUnknown` (the connection failed while DATA was in flight: the server may or may not
have accepted the message; SMTP offers no way to ask afterwards, RFC 5321 §6.1).
"""

from __future__ import annotations

import contextlib
import re
import smtplib
import socket
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    #: EHLO name; resolved once per process (smtplib otherwise runs `getfqdn` on every
    #: connection).
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


class SmtpRelayFault(SmtpDeferred):
    """The relay refused this fleet's connection settings, not the email: wrong credentials
    (535/534 to AUTH), a relay that requires STARTTLS or AUTH while the fleet speaks plain SMTP
    (530), a TLS setting the relay cannot serve. Every email would fail the same way until the
    configuration is fixed: deferred within the outage window like an unreachable relay (a
    password rotation must not dead-letter all mail), said loudly (`email.relay_fault`), and
    named by its cause, never by a recipient."""


def _relay_fault(config: SmtpConfig, code: int | None, reply: str, stage: str) -> SmtpRelayFault:
    where = f"SMTP relay {config.host}:{config.port}"
    upper = reply.upper()
    if "STARTTLS" in upper or stage == "tls":
        cause, error_code = (
            f"{where} requires STARTTLS, SMTP_SECURITY is {config.security!r} "
            "(set SMTP_SECURITY=starttls)"
            if stage != "tls"
            else f"{where} cannot serve SMTP_SECURITY={config.security!r}",
            "SMTP_TLS_MISMATCH",
        )
    elif stage == "auth":
        cause, error_code = (
            f"{where} refused our credentials (check SMTP_USERNAME and SMTP_PASSWORD)",
            "SMTP_AUTH_FAILED",
        )
    else:
        cause, error_code = (
            f"{where} requires authentication (set SMTP_USERNAME and SMTP_PASSWORD)",
            "SMTP_AUTH_REQUIRED",
        )
    return SmtpRelayFault(f"{cause}: {reply}", stage=stage, code=code, error_code=error_code)


#: Replies to MAIL or RCPT that are about the session, not the address (RFC 4954 §6).
_SESSION_REFUSALS = (530,)


class SmtpOutcomeUnknown(SmtpFailure):
    """The connection was lost while DATA was in flight: accepted or not, nobody can tell."""


def _text(message: bytes | str) -> str:
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else message


def _reply(code: int, message: bytes | str) -> str:
    return f"{code} {' '.join(_text(message).split())}".strip()


def _classify(
    code: int, message: bytes | str, stage: str, recipient: str | None = None
) -> SmtpFailure:
    kind = SmtpRejected if 500 <= code < 600 else SmtpDeferred
    # 421: the server is closing the connection (RFC 5321 §3.8), whatever the command.
    return kind(
        _reply(code, message), stage=stage, code=code, recipient=recipient, reusable=code != 421
    )


def _tls_context(config: SmtpConfig) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if not config.validate_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


SMTPUTF8_NOT_SUPPORTED = "SMTPUTF8_NOT_SUPPORTED"


def _mail_options(client: smtplib.SMTP, config: SmtpConfig, envelope: Envelope) -> list[str]:
    """MAIL FROM options, with the command encoding set: SMTPUTF8 when an address needs it and
    the server offers it (RFC 6531 §3.4); a server without it can never take such an address."""
    if not envelope.smtputf8:
        client.command_encoding = "ascii"
        return []
    if not client.has_extn("smtputf8"):
        raise SmtpRejected(
            f"{config.host}:{config.port} does not offer SMTPUTF8, needed by a non-ASCII local "
            f"part in {', '.join(a for a in (envelope.sender, *envelope.recipients) if not a.isascii())}",
            stage="mail",
            error_code=SMTPUTF8_NOT_SUPPORTED,
            reusable=True,
        )
    client.command_encoding = "utf-8"
    return ["SMTPUTF8"]


def _open(config: SmtpConfig) -> smtplib.SMTP:
    """Connected, greeted (220), EHLO answered, TLS and login done as configured."""
    if config.security == "tls":
        client: smtplib.SMTP = smtplib.SMTP_SSL(
            config.host, config.port, local_hostname=config.local_hostname,
            timeout=config.timeout_s, context=_tls_context(config),
        )  # fmt: skip
    else:
        client = smtplib.SMTP(
            config.host, config.port, local_hostname=config.local_hostname, timeout=config.timeout_s
        )
    try:
        client.ehlo_or_helo_if_needed()
        if config.security == "starttls":  # never opportunistic: plain means plain
            if not client.has_extn("starttls"):
                raise smtplib.SMTPNotSupportedError("STARTTLS extension not supported by server.")
            code, message = client.starttls(context=_tls_context(config))
            if code != 220:
                raise smtplib.SMTPResponseException(code, message)
            client.ehlo()
        if config.username:
            if not client.has_extn("auth"):
                raise _relay_fault(config, None, "AUTH not offered (SMTP_USERNAME is set)", "auth")
            try:
                client.login(config.username, config.password or "")
            except smtplib.SMTPResponseException as exc:
                if exc.smtp_code in (530, 534, 535, 538):
                    reply = _reply(exc.smtp_code, exc.smtp_error)
                    raise _relay_fault(config, exc.smtp_code, reply, "auth") from None
                raise
    except BaseException:
        client.close()
        raise
    return client


def _command(
    client: smtplib.SMTP, verb: str, path: str, options: list[str] | None = None
) -> tuple[int, bytes]:
    """MAIL or RCPT with an envelope address as built by message.envelope_address (a bare
    addr-spec, its domain an A-label), not re-parsed by smtplib's `quoteaddr`."""
    client.putcmd(verb, " ".join([path, *(options or ())]))
    return client.getreply()


def connect(config: SmtpConfig) -> smtplib.SMTP:
    """A new connection, greeted; `SmtpDeferred` (or `SmtpRejected` for a TLS setting the
    server cannot serve, or a 5xx greeting or login reply) when it cannot be opened."""
    try:
        return _open(config)
    except SmtpFailure:
        raise
    except smtplib.SMTPNotSupportedError as exc:
        raise _relay_fault(config, None, str(exc), "tls") from None
    except smtplib.SMTPResponseException as exc:
        raise _classify(exc.smtp_code, exc.smtp_error, "connect") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise SmtpDeferred(
            f"SMTPConnectError: cannot connect to {config.host}:{config.port}: "
            f"{type(exc).__name__}: {exc}",
            stage="connect",
        ) from None


def is_connected(client: smtplib.SMTP) -> bool:
    return client.sock is not None


class StaleConnection(Exception):
    """A pooled connection the server had closed: nothing was sent on it, open another."""


def begin(
    client: smtplib.SMTP, config: SmtpConfig, envelope: Envelope, *, reused: bool
) -> dict[str, str]:
    """MAIL and RCPT; returns the copies refused while the primary recipient was accepted.
    On a reused connection, a first command that finds it closed is a `StaleConnection`."""
    stage = "mail"
    try:
        options = _mail_options(client, config, envelope)
        try:
            code, message = _command(client, "mail", f"FROM:<{envelope.sender}>", options)
        except (smtplib.SMTPServerDisconnected, ConnectionError) as exc:
            # (smtplib reports a read timeout as a disconnection: a server that hangs is no
            # stale connection)
            if reused and not isinstance(exc.__context__, TimeoutError):
                raise StaleConnection(str(exc)) from None
            raise
        if code != 250:
            if reused and code == 421:  # an idle timeout the server announced
                raise StaleConnection(_reply(code, message))
            if code in _SESSION_REFUSALS:
                raise _relay_fault(config, code, _reply(code, message), "mail")
            raise _classify(code, message, "mail")
        refused: dict[str, str] = {}
        stage = "rcpt"
        for index, recipient in enumerate(envelope.recipients):
            code, message = _command(client, "rcpt", f"TO:<{recipient}>")
            if code not in (250, 251):
                if code in _SESSION_REFUSALS:
                    raise _relay_fault(config, code, _reply(code, message), "rcpt")
                if index == 0:
                    raise _classify(code, message, "rcpt", recipient)
                refused[recipient] = _reply(code, message)
        return refused
    except smtplib.SMTPResponseException as exc:
        raise _classify(exc.smtp_code, exc.smtp_error, stage) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise SmtpDeferred(f"{type(exc).__name__}: {exc}", stage=stage) from None


_LINE_END = re.compile(rb"\r\n|\r|\n")


def _crlf(content: bytes) -> bytes:
    """Every line ended by CRLF (RFC 5321 §2.3.8); the serializer writes them already."""
    crlf = content.count(b"\r\n")
    if content.count(b"\n") == crlf and content.count(b"\r") == crlf:
        return content
    return _LINE_END.sub(b"\r\n", content)


def send_data(client: smtplib.SMTP, content: bytes) -> str:
    """DATA (smtplib dot-stuffs the content); the server's reply when it accepted the message."""
    try:
        code, message = client.data(_crlf(content))
    except smtplib.SMTPResponseException as exc:
        # A reply to DATA: definitely not accepted, the connection is fine.
        raise _classify(exc.smtp_code, exc.smtp_error, "data") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise SmtpOutcomeUnknown(f"{type(exc).__name__} during DATA: {exc}", stage="data") from None
    if code != 250:
        # A reply to the content: not accepted, and the transaction is over.
        raise _classify(code, message, "data")
    return _reply(code, message)


def reset(client: smtplib.SMTP) -> bool:
    """RSET after an aborted transaction; False when the connection is not fit for reuse."""
    if not is_connected(client):
        return False
    try:
        code, _ = client.rset()
    except (smtplib.SMTPException, OSError):
        return False
    return code == 250


def close(client: smtplib.SMTP, *, polite: bool) -> None:
    if polite and is_connected(client):
        with contextlib.suppress(smtplib.SMTPException, OSError):
            client.quit()
    with contextlib.suppress(OSError):
        client.close()
