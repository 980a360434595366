"""The UNCONFIRMED runbook against a real Postfix (issue 16): its log holds the Message-ID of
messages it never queued (cleanup logs it while the message arrives); `fleet email check-log`
answers from the queue id's qmgr `(queue active)` / `status=` lines instead."""

from __future__ import annotations

import smtplib
import socket
import uuid

import pytest
from typer.testing import CliRunner

from shared.jobs import catalog
from tests.support.wait import wait_for
from tests.workers.email.helpers import schedule, unique, wait_row
from workers.email.cli import app
from workers.email.maillog import NOT_FOUND, NOT_QUEUED, QUEUED, postfix_verdict


def _message(message_id: str, subject: str = "Hello", body: str = "body") -> bytes:
    return (
        f"Message-ID: {message_id}\r\nFrom: a@test.jobfleet\r\nTo: b@example.com\r\n"
        f"Subject: {subject}\r\n\r\n{body}\r\n"
    ).encode()


def _verdict(postfix, message_id: str):  # type: ignore[no-untyped-def]
    return postfix_verdict(postfix.log().splitlines(), message_id)


def test_an_accepted_email_is_reported_queued_by_check_log(make_email_worker, postfix, db) -> None:
    make_email_worker(postfix.port)
    email = schedule(db, unique("ada"))
    catalog.EMAIL_SEND.send(email.payload())
    message_id = wait_row(db, email.id, "SENT")["message_id"]
    wait_for(lambda: _verdict(postfix, message_id).status == QUEUED, what="qmgr line")

    result = CliRunner().invoke(
        app, ["check-log", str(email.id), "--org", str(email.org_id), "--log", str(postfix.maillog)]
    )

    assert result.exit_code == 0, result.output
    assert f"{message_id}: QUEUED by Postfix as {postfix.queue_id(message_id)}" in result.output
    assert "(queue active)" in result.output


def test_a_message_refused_at_the_end_of_data_is_in_the_log_but_not_queued(postfix) -> None:
    message_id = f"<{uuid.uuid4().hex}@test.jobfleet>"
    with smtplib.SMTP("127.0.0.1", postfix.port) as client, pytest.raises(smtplib.SMTPDataError):
        client.sendmail(
            "a@test.jobfleet", ["b@example.com"], _message(message_id, "reject-at-data")
        )

    wait_for(lambda: postfix.queue_id(message_id), what="cleanup's message-id line")
    assert message_id in postfix.log()  # what the old runbook looked for: found, yet not queued
    verdict = _verdict(postfix, message_id)
    assert verdict.status == NOT_QUEUED and verdict.queued == ()

    result = CliRunner().invoke(
        app, ["check-log", "--message-id", message_id, "--log", str(postfix.maillog)]
    )
    assert result.exit_code == 3 and "NOT_QUEUED" in result.output


def test_a_connection_lost_during_data_leaves_the_message_id_in_the_log_but_nothing_queued(
    postfix,
) -> None:
    # Given a client that dies in the middle of DATA (what makes an email UNCONFIRMED)
    message_id = f"<{uuid.uuid4().hex}@test.jobfleet>"
    lost_before = postfix.log().count("lost connection after DATA")
    with socket.create_connection(("127.0.0.1", postfix.port), timeout=10) as sock:
        with sock.makefile("rb") as reader:
            reader.readline()
            for command in (b"EHLO client\r\n", b"MAIL FROM:<a@test.jobfleet>\r\n",
                            b"RCPT TO:<b@example.com>\r\n", b"DATA\r\n"):  # fmt: skip
                sock.sendall(command)
                while reader.readline()[3:4] == b"-":
                    pass
        sock.sendall(_message(message_id, body="line\r\n" * 2_000))  # no final "."
        wait_for(lambda: postfix.queue_id(message_id), what="cleanup's message-id line")
        sock.shutdown(socket.SHUT_RDWR)

    # Then Postfix logged its Message-ID, and the log shows it was never queued
    queue_id = postfix.queue_id(message_id)
    wait_for(
        lambda: postfix.log().count("lost connection after DATA") > lost_before,
        what="the disconnect",
    )
    assert queue_id is not None and f"{queue_id}: message-id={message_id}" in postfix.log()
    assert _verdict(postfix, message_id).status == NOT_QUEUED


def test_a_message_id_postfix_never_saw_is_not_found(postfix) -> None:
    assert _verdict(postfix, f"<{uuid.uuid4().hex}@test.jobfleet>").status == NOT_FOUND
