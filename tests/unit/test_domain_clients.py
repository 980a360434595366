"""The email domain's client (`workers.email.client`) on the test kit: no Redis, no Postgres.

It validates before writing anything, writes its domain row with an id generated client-side (no
RETURNING, so a recording session can run it) and stages its job through the outbox in the
caller's transaction. (The other domains' clients: tests/workers/<domain>/test_client.py; this
one moves to tests/workers/email/ with that folder's next change.)
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.errors import PayloadError
from shared.jobs import catalog
from shared.testing import JobCapture
from workers.email.client import schedule_email

pytest_plugins = ["shared.testing.plugin"]

ORG = uuid.uuid4()


def locs(exc: pytest.ExceptionInfo[PayloadError]) -> list[tuple[object, ...]]:
    return [tuple(e["loc"]) for e in exc.value.errors]


def test_an_email_due_now_is_a_row_and_its_job_in_one_transaction(jobfleet: JobCapture) -> None:
    session = jobfleet.session()

    with session.begin():
        email = schedule_email(
            session,
            org_id=ORG,
            template_key="welcome",
            recipient_email="ada@example.com",
            variables={"NAME": "Ada"},
        )

    (insert,) = session.inserts_into("scheduled_emails", committed=True)
    assert insert.params["id"] == email.email_id and insert.params["status"] == "QUEUED"
    job = jobfleet.assert_sent(
        catalog.EMAIL_SEND, entity_id=email.email_id, template_key="welcome", variables__NAME="Ada"
    )
    assert (job.job_id, job.via, email.status) == (email.job_id, "outbox", "QUEUED")
    assert job.job_id == catalog.EMAIL_SEND.job_id(job.payload)
    assert "RETURNING" not in insert.sql


def test_an_email_due_later_is_scheduled_without_a_job(jobfleet: JobCapture) -> None:
    session = jobfleet.session()
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)

    email = schedule_email(
        session,
        org_id=ORG,
        template_key="otp-code",
        recipient_email="grace@example.com",
        variables={"CODE": "123 456", "EXPIRES_MINUTES": 10},
        send_at=now + timedelta(hours=1),
        now=now,
    )

    assert (email.status, email.job_id) == ("SCHEDULED", None)
    assert session.inserts_into("scheduled_emails")[0].params["send_at"] == now + timedelta(hours=1)
    jobfleet.assert_not_sent(catalog.EMAIL_SEND)


@pytest.mark.parametrize(
    ("template_key", "variables", "loc"),
    [
        ("no-such-template", {}, ("template_key",)),
        ("welcome", {}, ("variables",)),  # NAME missing
        (
            "support-reply",
            {"NAME": "x", "MESSAGE": "m", "TICKET_REF": "a\r\nBcc: x@y"},
            ("variables",),
        ),
        ("Welcome!", {"NAME": "x"}, ("template_key",)),  # the contract's pattern
    ],
)
def test_an_email_the_worker_could_not_render_is_refused_before_any_write(
    jobfleet: JobCapture, template_key: str, variables: dict[str, object], loc: tuple[str]
) -> None:
    session = jobfleet.session()

    with pytest.raises(PayloadError) as exc:
        schedule_email(
            session,
            org_id=ORG,
            template_key=template_key,
            recipient_email="ada@example.com",
            variables=variables,
        )

    assert locs(exc) == [loc]
    assert session.statements == [] and jobfleet.sent_jobs() == []
