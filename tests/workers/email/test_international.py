"""Internationalised addresses (issue 16): IDNA domains, SMTPUTF8 local parts, and a row that
mirrors its run whatever the failure. Against a private Postfix (SMTPUTF8 offered) and the
aiosmtpd test server (SMTPUTF8 not offered)."""

from __future__ import annotations

import uuid
from email import policy
from email.parser import Parser

import pytest

from shared.jobs import catalog
from tests.support.wait import wait_for
from tests.workers.email.helpers import row, schedule, wait_row, wait_run


def _delivered(postfix, message_id: str):  # type: ignore[no-untyped-def]
    [path] = wait_for(lambda: postfix.delivered(message_id), what=f"{message_id} delivered")
    return Parser(policy=policy.SMTPUTF8).parsestr(path.read_bytes().decode("utf-8"))


@pytest.mark.parametrize("local", ["josé", "用户"])
def test_a_non_ascii_local_part_is_delivered_with_smtputf8_when_the_server_offers_it(
    make_email_worker, postfix, db, local
) -> None:
    make_email_worker(postfix.port)
    address = f"{local}.{uuid.uuid4().hex[:6]}@example.com"
    email = schedule(db, address, name="Zoé")
    catalog.EMAIL_SEND.send(email.payload())

    sent = wait_row(db, email.id, "SENT")
    assert wait_run(email, "COMPLETED").attempt == 1
    msg = _delivered(postfix, sent["message_id"])
    assert msg["To"].addresses[0].addr_spec == address
    assert "=?" not in str(msg["To"]) and msg["To"].addresses[0].display_name == "Zoé"
    assert wait_for(lambda: postfix.envelope_recipients(sent["message_id"])) == [address]


def test_an_idn_domain_travels_as_its_a_label_in_the_envelope_and_the_headers(
    email_worker, smtp_server, db
) -> None:
    email = schedule(db, "anna@müller.example.com")
    catalog.EMAIL_SEND.send(email.payload())

    sent = wait_row(db, email.id, "SENT")
    [stored] = smtp_server.messages(sent["message_id"])
    assert stored.envelope_to == "anna@xn--mller-kva.example.com"
    raw = stored.path.read_bytes()
    to_line = next(line for line in raw.split(b"\r\n") if line.startswith(b"To:"))
    assert to_line == b"To: anna@xn--mller-kva.example.com"  # no encoded-word in an address
    assert raw.isascii()


def test_an_idn_domain_is_delivered_by_a_postfix_that_does_not_offer_smtputf8(
    make_email_worker, postfix, db
) -> None:
    make_email_worker(postfix.ascii_port)
    email = schedule(db, "anna@müller.example.com")
    catalog.EMAIL_SEND.send(email.payload())

    sent = wait_row(db, email.id, "SENT")
    assert wait_for(lambda: postfix.envelope_recipients(sent["message_id"])) == [
        "anna@xn--mller-kva.example.com"
    ]


@pytest.mark.parametrize("local", ["josé", "用户"])
def test_a_non_ascii_local_part_fails_permanently_when_the_server_lacks_smtputf8(
    make_email_worker, postfix, db, local
) -> None:
    make_email_worker(postfix.ascii_port)
    local = f"{local}.{uuid.uuid4().hex[:6]}"
    email = schedule(db, f"{local}@example.com")
    catalog.EMAIL_SEND.send(email.payload())

    run = wait_run(email, "DEAD")
    failed = row(db, email.id)
    assert run.attempt == 1 and run.error_code == "SMTPUTF8_NOT_SUPPORTED"
    assert "SMTPUTF8" in (run.error or "")
    assert failed["status"] == "FAILED" and failed["error_code"] == "SMTPUTF8_NOT_SUPPORTED"
    assert f"to=<{local}@" not in postfix.log()


def test_the_row_mirrors_the_run_when_the_transport_fails_unexpectedly(
    email_worker, smtp_server, db
) -> None:
    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise UnicodeEncodeError("ascii", "ü", 0, 1, "a bug in the transport")

    email_worker.mailer.transport = broken
    email = schedule(db, "mirror@example.com")
    catalog.EMAIL_SEND.send(email.payload())

    retrying = wait_for(
        lambda: (r := row(db, email.id))["attempts"] >= 1 and r["status"] == "QUEUED" and r,
        what="first attempt recorded",
    )
    assert retrying["error_code"] == "UNICODEENCODEERROR"
    run = wait_run(email, "DEAD")
    failed = row(db, email.id)
    assert run.error_code == "UNICODEENCODEERROR"
    assert failed["status"] == "FAILED" and failed["error_code"] == "UNICODEENCODEERROR"
