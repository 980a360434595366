"""A real SMTP server for the email tests, run in its own process:

    python -m tests.workers.email.smtp_server --port P --maildir D [--slow-s S]

It is the dev sink (messages stored as .eml before 250) plus behaviours chosen by the local
part of a recipient, so one server serves every case:
  reject*@    RCPT answered 550 5.1.1 (user unknown)
  greylist*@  RCPT answered 451 4.7.1 the first time for that address, 250 afterwards
  spam*@      DATA answered 554 5.7.1 (nothing stored)
  slow*@      message stored, then the 250 to DATA is held back S seconds
Prints READY once it listens; stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from workers.email.sink import ACCEPTED, MaildirHandler, start_sink, store_message


def _local(address: str) -> str:
    return address.split("@", 1)[0].lower()


class ScriptedHandler(MaildirHandler):
    def __init__(self, maildir: Path, slow_s: float) -> None:
        super().__init__(maildir)
        self.slow_s = slow_s
        self.greylisted: set[str] = set()

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: Any
    ) -> str:
        local = _local(address)
        if local.startswith("reject"):
            return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
        if local.startswith("greylist") and address not in self.greylisted:
            self.greylisted.add(address)
            return "451 4.7.1 Greylisted, please try again later"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        locals_ = [_local(r) for r in envelope.rcpt_tos]
        if any(x.startswith("spam") for x in locals_):
            return "554 5.7.1 Message rejected: looks like spam"
        store_message(
            self.maildir,
            envelope.mail_from,
            envelope.rcpt_tos,
            envelope.original_content or envelope.content,
        )
        if any(x.startswith("slow") for x in locals_):
            await asyncio.sleep(self.slow_s)
        return ACCEPTED


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--maildir", required=True)
    parser.add_argument("--slow-s", type=float, default=5.0)
    args = parser.parse_args()
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command at INFO
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    handle = start_sink(
        args.host, args.port, args.maildir, handler=ScriptedHandler(Path(args.maildir), args.slow_s)
    )
    print("READY", flush=True)
    try:
        stop.wait()
    finally:
        handle.stop()


if __name__ == "__main__":
    main()
