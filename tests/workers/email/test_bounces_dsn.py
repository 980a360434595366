"""Bounces from real DSNs (issue 22): the envelope sender is a VERP address naming the email;
Postfix accepts a message, its transport then refuses it, Postfix writes the RFC 3464 report and
relays it to the inbound listener, and the row becomes BOUNCED with the remote diagnostic, the
address suppressed. Bad inbound mail is kept and logged; the listener goes on."""

from __future__ import annotations

import smtplib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.jobs import catalog
from tests.support.wait import wait_for
from tests.workers.email.helpers import row, schedule, unique, wait_row
from tests.workers.email.postfix import BOUNCE_DOMAIN, free_port
from workers.email import sequences
from workers.email.feedback import inbound, tokens
from workers.email.settings import email_settings
from workers.email.wiring import utcnow


class Listener:
    def __init__(self, runtime: Any, port: int) -> None:
        self.key = tokens.feedback_key(email_settings(), runtime.settings.var_dir)
        self.port = port
        self.controller = inbound.start(
            "127.0.0.1", port, inbound.InboundHandler(runtime.pool, self.key, utcnow)
        )

    def send(self, rcpt: str, raw: bytes) -> None:
        with smtplib.SMTP("127.0.0.1", self.port, timeout=10) as smtp:
            smtp.sendmail("", [rcpt], raw)


@pytest.fixture
def listener(runtime, postfix) -> Iterator[Listener]:  # type: ignore[no-untyped-def]
    started = Listener(runtime, postfix.bounce_port)
    yield started
    started.controller.stop()


def _kept(db, rcpt: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    rows = db.execute(
        "SELECT reason, raw FROM email_inbound_kept WHERE rcpt_to = %s ORDER BY id", (rcpt,)
    ).fetchall()
    return [{"reason": r[0], "raw": bytes(r[1])} for r in rows]


def test_a_dsn_from_postfix_marks_the_email_bounced_and_suppresses_the_address(
    make_email_worker, postfix, listener, db
) -> None:
    make_email_worker(postfix.port, bounce_domain=BOUNCE_DOMAIN)
    to = unique("bounce-me")
    email = schedule(db, to, template="welcome", variables={"NAME": "A"})
    catalog.EMAIL_SEND.send(email.payload())
    wait_row(db, email.id, "SENT", "BOUNCED")  # Postfix took it: the 250 said nothing more

    bounced = wait_row(db, email.id, "BOUNCED", timeout=30)
    assert bounced["error_code"] == "DSN_5.1.1"
    assert "Mailbox does not exist (test transport)" in bounced["error"]
    assert bounced["bounced_at"] is not None and bounced["sent_at"] is not None
    suppressed = db.execute(
        "SELECT reason, detail FROM email_suppressions WHERE org_id = %s AND email = lower(%s)",
        (email.org_id, to),
    ).fetchone()
    assert suppressed[0] == "BOUNCED" and "Mailbox does not exist" in suppressed[1]
    # The report reached us through Postfix's smtp client, to the VERP address of this email.
    # Postfix logs that delivery once our listener has answered its DATA, which is when the
    # row turned BOUNCED: the line may come a moment after.
    verp = tokens.verp_address(listener.key, email.id, BOUNCE_DOMAIN)
    delivered = f"to=<{verp}>, relay=127.0.0.1[127.0.0.1]:{postfix.bounce_port}"
    wait_for(lambda: delivered in postfix.log(), timeout=10, what="Postfix's log of the DSN")


def _dsn(recipient: str, *, status: str | None = "5.2.2", action: str = "failed") -> bytes:
    """An RFC 3464 report as another MTA writes it (`status=None`: a broken one)."""
    status_line = f"Status: {status}\r\n" if status else ""
    return (
        "From: MAILER-DAEMON@mx.example\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        "MIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="B"\r\n\r\n'
        "--B\r\nContent-Type: text/plain\r\n\r\nThe mail could not be delivered.\r\n"
        "--B\r\nContent-Type: message/delivery-status\r\n\r\n"
        "Reporting-MTA: dns; mx.example\r\n\r\n"
        f"Final-Recipient: rfc822; {recipient}\r\nAction: {action}\r\n{status_line}"
        "Diagnostic-Code: smtp; 552 5.2.2\r\n    Mailbox full\r\n"
        "--B--\r\n"
    ).encode()


def test_bad_inbound_mail_is_kept_and_logged_and_the_listener_goes_on(runtime, db) -> None:
    listener = Listener(runtime, free_port())
    try:
        _bad_mail_then_a_genuine_bounce(listener, db)
    finally:
        listener.controller.stop()


def _bad_mail_then_a_genuine_bounce(listener: Listener, db: Any) -> None:
    now = datetime.now(UTC)
    to = unique("full")
    seq = sequences.start(
        db, org_id=uuid.uuid4(), name="n", recipient_email=to,
        steps=[sequences.Step("welcome", 0)], now=now, variables={"NAME": "A"},
    )  # fmt: skip
    email_id = db.execute(
        "SELECT id FROM scheduled_emails WHERE sequence_id = %s", (seq,)
    ).fetchone()[0]
    db.execute(
        "UPDATE scheduled_emails SET status = 'SENT', sent_at = now() WHERE id = %s", (email_id,)
    )
    verp = tokens.verp_address(listener.key, email_id, BOUNCE_DOMAIN)

    # A forged VERP address is refused at RCPT: no open mailbox.
    forged = tokens.verp_address(b"another key", email_id, BOUNCE_DOMAIN)
    with pytest.raises(smtplib.SMTPRecipientsRefused):
        listener.send(forged, b"Subject: x\r\n\r\nhello\r\n")

    garbage = [
        b"Subject: out of office\r\n\r\nI am away.\r\n",  # an autoreply, no report
        _dsn(to, status=None),  # a report without Status
        b"\xff\xfe\x00 not even headers \r\n\r\n\x00\r\n",
    ]
    for raw in garbage:
        listener.send(verp, raw)
    kept = wait_for(lambda: len(k := _kept(db, verp)) == 3 and k, what="3 kept messages")
    assert [k["raw"].replace(b"\r\n", b"\n") for k in kept] == [
        g.replace(b"\r\n", b"\n") for g in garbage
    ]
    assert "NotADsn" in kept[0]["reason"] and "Status" in kept[1]["reason"]
    assert row(db, email_id)["status"] == "SENT"

    listener.send(verp, _dsn(to, status="4.2.2", action="delayed"))  # soft: changes nothing
    assert row(db, email_id)["status"] == "SENT" and len(_kept(db, verp)) == 3

    listener.send(verp, _dsn(to.upper()))  # the listener still works: a genuine hard bounce
    bounced = wait_row(db, email_id, "BOUNCED")
    assert bounced["error_code"] == "DSN_5.2.2" and bounced["error"] == "552 5.2.2 Mailbox full"
    assert db.execute("SELECT status FROM email_sequences WHERE id = %s", (seq,)).fetchone() == (
        "STOPPED",
    )
