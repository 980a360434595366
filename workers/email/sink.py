"""The dev SMTP sink of `make run`: accepts every message and keeps it as `var/mail/*.eml`.

    python -m workers.email.sink [--host 127.0.0.1] [--port 2525] [--maildir var/mail]

A message is written (atomically, then renamed) before the sink answers 250, so a message the
worker saw accepted is always on disk. Each file starts with `Return-Path` and
`X-Envelope-To` (the SMTP envelope: Bcc and refused copies are not in the headers).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

ACCEPTED = "250 2.0.0 Message accepted for delivery"


def store_message(maildir: Path, mail_from: str, rcpt_tos: Sequence[str], content: bytes) -> Path:
    headers = BytesParser(policy=policy.default).parsebytes(content, headersonly=True)
    key = str(headers.get("Message-ID") or "").encode() or content
    name = f"{time.time_ns()}-{hashlib.sha256(key).hexdigest()[:12]}.eml"
    envelope = f"Return-Path: <{mail_from}>\r\nX-Envelope-To: {', '.join(rcpt_tos)}\r\n".encode()
    maildir.mkdir(parents=True, exist_ok=True)
    tmp = maildir / f".{name}.tmp"
    with open(tmp, "wb") as f:
        f.write(envelope + content)
        f.flush()
        os.fsync(f.fileno())
    final = maildir / name
    os.replace(tmp, final)
    return final


class MaildirHandler:
    """aiosmtpd handler; subclasses may override `handle_RCPT` / `handle_DATA` (tests do)."""

    def __init__(self, maildir: Path) -> None:
        self.maildir = Path(maildir)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        store_message(
            self.maildir,
            envelope.mail_from,
            envelope.rcpt_tos,
            envelope.original_content or envelope.content,
        )
        return ACCEPTED


@dataclass
class SinkHandle:
    host: str
    port: int
    maildir: Path
    controller: Controller

    def stop(self) -> None:
        self.controller.stop()


def start_sink(
    host: str, port: int, maildir: str | Path, *, handler: MaildirHandler | None = None
) -> SinkHandle:
    """Serve SMTP on host:port in a background thread until `handle.stop()`."""
    maildir = Path(maildir)
    maildir.mkdir(parents=True, exist_ok=True)
    controller = Controller(
        handler or MaildirHandler(maildir), hostname=host, port=port, ready_timeout=10
    )
    controller.start()
    return SinkHandle(host, port, maildir, controller)


@dataclass(frozen=True)
class InboxItem:
    path: Path
    message_id: str
    sender: str
    to: str
    envelope_to: str
    subject: str
    date: str


def read_inbox(maildir: str | Path) -> list[InboxItem]:
    """The stored messages, oldest first."""
    items = []
    for path in sorted(Path(maildir).glob("*.eml")):
        with open(path, "rb") as f:
            msg = BytesParser(policy=policy.default).parse(f, headersonly=True)
        items.append(
            InboxItem(
                path=path,
                message_id=str(msg.get("Message-ID", "")),
                sender=str(msg.get("From", "")),
                to=str(msg.get("To", "")),
                envelope_to=str(msg.get("X-Envelope-To", "")),
                subject=str(msg.get("Subject", "")),
                date=str(msg.get("Date", "")),
            )
        )
    return items


def read_message(path: str | Path) -> EmailMessage:
    with open(path, "rb") as f:
        msg = BytesParser(policy=policy.default).parse(f)
    assert isinstance(msg, EmailMessage)
    return msg


def serve(host: str, port: int, maildir: str | Path) -> None:
    """Run the sink in the foreground until SIGTERM or SIGINT."""
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command at INFO
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    handle = start_sink(host, port, maildir)
    print(f"smtp sink on {host}:{port}, storing into {handle.maildir}", flush=True)
    try:
        stop.wait()
    finally:
        handle.stop()


def main(argv: Sequence[str] | None = None) -> None:
    from shared.config import get_settings

    from .settings import email_settings

    email = email_settings()
    parser = argparse.ArgumentParser(
        prog="python -m workers.email.sink", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default=email.smtp_host)
    parser.add_argument("--port", type=int, default=email.smtp_port)
    parser.add_argument("--maildir", default=os.path.join(get_settings().var_dir, "mail"))
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.maildir)


if __name__ == "__main__":
    main()
