"""The inbound SMTP listener: takes the DSNs sent back to the VERP senders (bounces.py), and
the unsubscribe requests sent to List-Unsubscribe's mailto (`EMAIL_UNSUBSCRIBE_MAILTO`, when its
domain's MX leads here too: unsubscribe.by_mail).

    python -m workers.email.feedback.inbound      # `email-inbound` under `make run`

aiosmtpd on `EMAIL_INBOUND_HOST:EMAIL_INBOUND_PORT`, the MX (or the relay's transport) of
`EMAIL_BOUNCE_DOMAIN` pointing at it. RCPT accepts only VERP addresses this fleet signed and
the unsubscribe address (550 otherwise: no open mailbox). After DATA each recipient's DSN is applied in its own transaction;
a message that cannot be used (not a DSN, a broken report, an email that no longer exists) is
kept whole in `email_inbound_kept` and logged, and still answered 250: retrying would not make
it readable. Only when even keeping it fails (the database is down) is the answer 451, so the
reporting MTA tries again later. Nothing a sender writes can stop the listener.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from aiosmtpd.controller import Controller

from . import bounces, tokens, unsubscribe

log = structlog.get_logger("jobfleet.email.feedback")

#: Largest inbound message read (a DSN quotes the original's headers at most, RFC 3464 §2.1).
MAX_BYTES = 1_000_000


class InboundHandler:
    def __init__(
        self,
        pool: Any,
        key: bytes,
        clock: Callable[[], datetime],
        unsubscribe_address: str | None = None,
    ) -> None:
        self.pool = pool
        self.key = key
        self.clock = clock
        #: List-Unsubscribe's mailto (EMAIL_UNSUBSCRIBE_MAILTO), when it leads here.
        self.unsubscribe_address = (unsubscribe_address or "").lower() or None

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        try:
            if address.lower() != self.unsubscribe_address:
                tokens.verp_email_id(self.key, address)
        except tokens.BadToken:
            return "550 5.1.1 No such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw = envelope.original_content or envelope.content
        try:
            await asyncio.get_running_loop().run_in_executor(
                None, self.receive, envelope.mail_from or "", list(envelope.rcpt_tos), raw
            )
        except Exception as exc:  # the database is down: the MTA keeps it and tries again
            log.error("email.inbound_unavailable", error=f"{type(exc).__name__}: {exc}")
            return "451 4.3.0 Temporarily unable to process the message, try again later"
        return "250 2.0.0 OK"

    def receive(self, mail_from: str, rcpts: list[str], raw: bytes) -> None:
        for rcpt in rcpts:
            try:
                with self.pool.connection() as conn:
                    conn.execute("SET LOCAL synchronous_commit TO on")
                    if rcpt.lower() == self.unsubscribe_address:
                        if unsubscribe.by_mail(conn, self.key, raw, self.clock()) is None:
                            raise LookupError("no such email")
                    else:
                        bounces.apply_dsn(conn, self.key, rcpt, raw, self.clock())
            except Exception as exc:  # unusable: kept for an operator
                reason = f"{type(exc).__name__}: {exc}"
                with self.pool.connection() as conn:
                    kept = bounces.keep(conn, mail_from, rcpt, reason, raw)
                log.warning("email.inbound_kept", kept_id=kept, reason=reason)


def start(host: str, port: int, handler: InboundHandler) -> Controller:
    controller = Controller(
        handler,
        hostname=host,
        port=port,
        ready_timeout=10,
        data_size_limit=MAX_BYTES,
    )
    controller.start()
    return controller


def main() -> None:
    from shared.config import get_settings
    from shared.observability.health import HealthServer
    from shared.observability.logging import configure_logging
    from shared.observability.probes import postgres_check
    from shared.runtime import Runtime, set_runtime

    from ..settings import email_settings
    from ..wiring import utcnow

    settings, email = get_settings(), email_settings()
    configure_logging(level=settings.log_level, fmt=settings.log_format, process="email-inbound")
    runtime = Runtime(settings)
    set_runtime(runtime)
    handler = InboundHandler(
        runtime.pool, tokens.feedback_key(email, settings.var_dir), utcnow, email.unsubscribe_mailto
    )
    controller = start(email.inbound_host, email.inbound_port, handler)
    health = None
    if settings.health_port:
        health = HealthServer(
            host=settings.health_host,
            port=settings.health_port,
            service="email-inbound",
            checks={"postgres": postgres_check(settings.database_dsn)},
            metrics_token=settings.metrics_token,
        ).start()
    log.info("email.inbound_listening", port=email.inbound_port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    controller.stop()
    if health is not None:
        health.stop()
    runtime.close()


if __name__ == "__main__":
    main()
