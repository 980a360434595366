"""One-click unsubscribe (issue 22, RFC 8058): sequence and marketing emails carry
List-Unsubscribe (a signed, expiring HTTPS link and a mailto) and List-Unsubscribe-Post; a POST
of the link, through the example product API that mounts the feedback router, suppresses the
address for the org and stops its sequences. Messages go through a real Postfix; the link is
read from the delivered copy."""

from __future__ import annotations

import email
import email.policy
import re
import smtplib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from fastapi.testclient import TestClient

from examples.product_api.app import create_app
from shared.jobs import catalog
from tests.support.wait import wait_for
from tests.workers.email.helpers import row, schedule, unique, wait_row
from workers.email import sequences, store
from workers.email.due import run_due
from workers.email.feedback import tokens, unsubscribe
from workers.email.settings import email_settings

STEPS = [sequences.Step("welcome", 0), sequences.Step("quote-reminder", 3_600)]
VARS = {"NAME": "Ada", "QUOTE_REF": "Q-7", "QUOTE_URL": "https://example.com/q/7"}
VARS["EXPIRES_ON"] = "2026-12-31"


@pytest.fixture
def api(runtime) -> Any:  # type: ignore[no-untyped-def]
    with TestClient(create_app(runtime=lambda: runtime)) as client:  # no API key: none needed
        yield client


def _start(db, to: str) -> uuid.UUID:  # type: ignore[no-untyped-def]
    return sequences.start(
        db,
        org_id=uuid.uuid4(),
        name="onboarding",
        recipient_email=to,
        steps=STEPS,
        now=datetime.now(UTC),
        variables=VARS,
    )


def _step(db, seq: uuid.UUID, step: int) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    found = db.execute(
        "SELECT id FROM scheduled_emails WHERE sequence_id = %s AND sequence_step = %s",
        (seq, step),
    ).fetchone()
    return row(db, found[0]) if found else {}


def _state(db, org: uuid.UUID, to: str, seq: uuid.UUID) -> tuple[Any, ...]:  # type: ignore[no-untyped-def]
    suppressed = db.execute(
        "SELECT reason FROM email_suppressions WHERE org_id = %s AND email = lower(%s)",
        (org, to),
    ).fetchone()
    status = db.execute("SELECT status FROM email_sequences WHERE id = %s", (seq,)).fetchone()
    return (suppressed[0] if suppressed else None, status[0])


def _delivered(postfix, message_id: str) -> email.message.EmailMessage:  # type: ignore[no-untyped-def]
    copies = wait_for(lambda: postfix.delivered(message_id), what=f"{message_id} delivered")
    assert len(copies) == 1, copies
    return email.message_from_bytes(copies[0].read_bytes(), policy=email.policy.default)  # type: ignore[return-value]


def _links(msg: email.message.EmailMessage) -> tuple[str, str]:
    targets = re.findall(r"<([^>]+)>", str(msg["List-Unsubscribe"]))
    https = [t for t in targets if t.startswith("http")]
    mailto = [t for t in targets if t.startswith("mailto:")]
    assert len(https) == 1 and len(mailto) == 1, targets
    return https[0], mailto[0]


def test_a_sequence_email_unsubscribes_in_one_click_and_its_sequence_stops(
    make_email_worker, postfix, db, api
) -> None:
    worker = make_email_worker(postfix.port)
    to = unique("leaver")
    seq = _start(db, to)
    assert (
        run_due(
            worker.mailer.pool.connection, worker.mailer.send_job, now=datetime.now(UTC)
        ).enqueued
        == 1
    )
    first = wait_row(db, _step(db, seq, 0)["id"], "SENT")
    org = first["org_id"]

    msg = _delivered(postfix, first["message_id"])
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    url, mailto = _links(msg)
    assert mailto.startswith("mailto:unsubscribe@") and "subject=unsubscribe%20" in mailto
    path = urlsplit(url).path
    assert path.startswith("/email/unsubscribe/")

    # A GET (a link scanner) changes nothing: a page whose form POSTs.
    page = api.get(path)
    assert page.status_code == 200 and 'method="post"' in page.text
    assert _state(db, org, to, seq) == (None, "ACTIVE")

    done = api.post(path, content=b"List-Unsubscribe=One-Click",
                    headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert done.status_code == 200, done.text
    assert done.json() == {"status": "UNSUBSCRIBED", "new": True, "sequences_stopped": 1}
    assert _state(db, org, to, seq) == ("UNSUBSCRIBED", "STOPPED")
    assert _step(db, seq, 1)["status"] == "CANCELED"

    again = api.post(path, content=b"List-Unsubscribe=One-Click")  # idempotent
    assert again.status_code == 200
    assert again.json() == {"status": "UNSUBSCRIBED", "new": False, "sequences_stopped": 0}
    assert db.execute(
        "SELECT count(*) FROM email_suppressions WHERE org_id = %s", (org,)
    ).fetchone() == (1,)


def test_transactional_templates_carry_no_unsubscribe_header(
    make_email_worker, postfix, db
) -> None:
    make_email_worker(postfix.port)
    code = schedule(db, unique("otp"))  # otp-code: transactional
    welcome = schedule(db, unique("hello"), template="welcome", variables={"NAME": "A"})
    for sent in (code, welcome):
        catalog.EMAIL_SEND.send(sent.payload())
    code_msg = _delivered(postfix, wait_row(db, code.id, "SENT")["message_id"])
    welcome_msg = _delivered(postfix, wait_row(db, welcome.id, "SENT")["message_id"])

    assert code_msg["List-Unsubscribe"] is None and code_msg["List-Unsubscribe-Post"] is None
    assert welcome_msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    _links(welcome_msg)


def test_forged_and_expired_tokens_are_refused_and_change_nothing(runtime, db, api) -> None:
    to = unique("target")
    seq = _start(db, to)
    step = _step(db, seq, 0)
    email_id, org = step["id"], step["org_id"]
    key = tokens.feedback_key(email_settings(), runtime.settings.var_dir)
    now = datetime.now(UTC)
    good = tokens.sign(key, unsubscribe.PURPOSE, email_id, org, now + timedelta(days=1))
    body, mac = good.split(".")

    refused = {
        "another key": (tokens.sign(b"x" * 32, "unsubscribe", email_id, org, now + timedelta(days=1)), 400),
        "another purpose": (tokens.sign(key, "verp", email_id, org, now + timedelta(days=1)), 400),
        "another org, same signature": (
            tokens.sign(b"x", "unsubscribe", email_id, uuid.uuid4(), now).split(".")[0] + "." + mac, 400),
        "truncated": (body, 400),
        "garbage": ("not-a-token", 400),
        "expired": (tokens.sign(key, unsubscribe.PURPOSE, email_id, org, now - timedelta(seconds=1)), 410),
    }  # fmt: skip
    for why, (token, status) in refused.items():
        answer = api.post(f"/email/unsubscribe/{token}")
        assert answer.status_code == status, (why, answer.text)
        assert api.get(f"/email/unsubscribe/{token}").status_code == status, why
    assert _state(db, org, to, seq) == (None, "ACTIVE")
    assert db.execute(
        "SELECT count(*) FROM email_suppressions WHERE org_id = %s", (org,)
    ).fetchone() == (0,)

    assert api.post(f"/email/unsubscribe/{good}").status_code == 200  # the genuine one works
    assert _state(db, org, to, seq) == ("UNSUBSCRIBED", "STOPPED")


def test_the_mailto_unsubscribes_through_the_inbound_listener(runtime, db) -> None:
    from tests.workers.email.postfix import free_port
    from workers.email.feedback import inbound
    from workers.email.wiring import utcnow

    to = unique("by-mail")
    seq = _start(db, to)
    step = _step(db, seq, 0)
    email_row = store.get(db, step["id"], step["org_id"])
    assert email_row is not None
    key = tokens.feedback_key(email_settings(), runtime.settings.var_dir)
    header = unsubscribe.headers(email_settings(), key, email_row, datetime.now(UTC))
    mailto = urlsplit(_links_of(header["List-Unsubscribe"])[1])
    address, subject = mailto.path, unquote(mailto.query.removeprefix("subject="))

    port = free_port()
    handler = inbound.InboundHandler(runtime.pool, key, utcnow, address)
    controller = inbound.start("127.0.0.1", port, handler)
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
            forged = subject[:-4] + ("AAAA" if not subject.endswith("AAAA") else "BBBB")
            smtp.sendmail(to, [address], f"Subject: {forged}\r\n\r\n".encode())
            kept = db.execute(
                "SELECT reason FROM email_inbound_kept WHERE rcpt_to = %s", (address,)
            ).fetchall()
            assert len(kept) == 1 and "BadToken" in kept[0][0]
            assert _state(db, email_row.org_id, to, seq) == (None, "ACTIVE")

            smtp.sendmail(to, [address], f"Subject: {subject}\r\n\r\nplease\r\n".encode())
    finally:
        controller.stop()
    assert _state(db, email_row.org_id, to, seq) == ("UNSUBSCRIBED", "STOPPED")


def _links_of(value: str) -> tuple[str, str]:
    targets = re.findall(r"<([^>]+)>", value)
    return targets[0], targets[1]
