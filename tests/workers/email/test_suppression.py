"""Hard bounces (issue 16): once an address hard-bounced (5xx to RCPT), no email of any kind is
attempted to it again, unless its template is exempt (EMAIL_BOUNCE_EXEMPT_TEMPLATES). Repeated
bounces hurt the sender's reputation. Against a real Postfix."""

from __future__ import annotations

from shared.jobs import catalog
from tests.workers.email.helpers import row, schedule, unique, wait_row, wait_run


def _rcpt_tries(postfix, address: str) -> int:  # type: ignore[no-untyped-def]
    return postfix.log().count(f"to=<{address}> proto=ESMTP")


def test_a_transactional_email_to_a_hard_bounced_address_is_not_attempted(
    make_email_worker, postfix, db
) -> None:
    make_email_worker(postfix.port)
    address = unique("reject")
    first = schedule(db, address)
    catalog.EMAIL_SEND.send(first.payload())
    assert wait_run(first, "DEAD").error_code == "SMTP_550"
    assert _rcpt_tries(postfix, address) == 1

    second = schedule(db, address, org=first.org_id, template="welcome", variables={"NAME": "A"})
    catalog.EMAIL_SEND.send(second.payload())

    suppressed = wait_row(db, second.id, "CANCELED")
    run = wait_run(second, "COMPLETED")
    assert suppressed["error_code"] == "RECIPIENT_BOUNCED" and suppressed["attempts"] == 0
    assert "550 5.1.1" in suppressed["error"]  # the bounce that suppressed it
    assert run.result == {"status": "SUPPRESSED", "reason": "BOUNCED"}
    assert _rcpt_tries(postfix, address) == 1


def test_the_suppression_belongs_to_the_org_that_saw_the_bounce(
    make_email_worker, postfix, db
) -> None:
    make_email_worker(postfix.port)
    address = unique("reject")
    first = schedule(db, address)
    catalog.EMAIL_SEND.send(first.payload())
    wait_run(first, "DEAD")

    other_org = schedule(db, address)  # another tenant: its own sender reputation, its own list
    catalog.EMAIL_SEND.send(other_org.payload())

    assert wait_run(other_org, "DEAD").error_code == "SMTP_550"
    assert _rcpt_tries(postfix, address) == 2


def test_an_exempt_template_is_still_attempted_after_a_bounce(
    make_email_worker, postfix, db
) -> None:
    make_email_worker(postfix.port, bounce_exempt_templates=["otp-code"])
    address = unique("reject")
    first = schedule(db, address, template="welcome", variables={"NAME": "A"})
    catalog.EMAIL_SEND.send(first.payload())
    wait_run(first, "DEAD")

    code = schedule(db, address, org=first.org_id)  # otp-code: exempt
    catalog.EMAIL_SEND.send(code.payload())

    assert wait_run(code, "DEAD").error_code == "SMTP_550"
    assert row(db, code.id)["status"] == "FAILED" and _rcpt_tries(postfix, address) == 2
