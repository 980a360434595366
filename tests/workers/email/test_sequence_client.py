"""The producer API of email sequences (issue 30: starting one needed `workers.email.sequences`
internals): start, stop and status in the caller's SQLAlchemy transaction, then a real email
worker and the due sweep send the steps."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.errors import PayloadError
from tests.workers.email.helpers import unique, wait_row
from workers.email.client import SequenceStep, sequence_status, start_sequence, stop_sequence
from workers.email.due import run_due

VARS = {
    "NAME": "Ada",
    "QUOTE_REF": "Q-7",
    "QUOTE_URL": "https://example.com/q/7",
    "EXPIRES_ON": "2026-12-31",
}
STEPS = [SequenceStep("welcome"), SequenceStep("quote-reminder", delay_s=3_600)]


def _step(db, sequence_id: uuid.UUID, step: int):  # type: ignore[no-untyped-def]
    return db.execute(
        "SELECT id, status FROM scheduled_emails WHERE sequence_id = %s AND sequence_step = %s",
        (sequence_id, step),
    ).fetchone()


def test_a_sequence_started_in_the_callers_transaction_is_sent_step_by_step(
    runtime, email_worker, db
) -> None:
    org = uuid.uuid4()
    with runtime.sessions() as session, session.begin():
        started = start_sequence(
            session, org_id=org, name="onboarding", recipient_email=unique("ada"),
            steps=STEPS, variables=VARS,
        )  # fmt: skip
    assert started.status == "ACTIVE"

    run_due(email_worker.mailer.pool.connection, email_worker.mailer.send_job,
            now=datetime.now(UTC), batch=50)  # fmt: skip
    sent = wait_row(db, started.first_email_id, "SENT")
    with runtime.sessions() as session:
        status = sequence_status(session, org_id=org, sequence_id=started.sequence_id)
    assert status is not None and (status["status"], status["current_step"]) == ("ACTIVE", 1)
    assert status["next_send_at"] == sent["sent_at"] + timedelta(seconds=3_600)

    with runtime.sessions() as session, session.begin():
        assert stop_sequence(session, org_id=org, sequence_id=started.sequence_id)
        assert not stop_sequence(session, org_id=uuid.uuid4(), sequence_id=started.sequence_id)
    assert _step(db, started.sequence_id, 1)[1] == "CANCELED"
    with runtime.sessions() as session:
        status = sequence_status(session, org_id=org, sequence_id=started.sequence_id)
        assert (
            sequence_status(session, org_id=uuid.uuid4(), sequence_id=started.sequence_id) is None
        )
    assert (status["status"], status["stop_reason"]) == ("STOPPED", "STOPPED_BY_PRODUCT")


def test_a_rolled_back_start_leaves_nothing(runtime, db) -> None:
    org = uuid.uuid4()
    with pytest.raises(RuntimeError), runtime.sessions() as session, session.begin():
        start_sequence(session, org_id=org, name="n", recipient_email="a@example.com",
                       steps=STEPS, variables=VARS)  # fmt: skip
        raise RuntimeError("the product's own write failed")
    assert db.execute(
        "SELECT count(*) FROM email_sequences WHERE org_id = %s", (org,)
    ).fetchone() == (0,)


def test_a_step_the_worker_could_not_render_is_refused_before_any_write(runtime, db) -> None:
    org = uuid.uuid4()
    with pytest.raises(PayloadError) as exc, runtime.sessions() as session, session.begin():
        start_sequence(session, org_id=org, name="n", recipient_email="a@example.com",
                       steps=STEPS, variables={"NAME": "Ada"})  # fmt: skip
    assert exc.value.errors[0]["loc"][:2] == ("steps", 1)  # quote-reminder lacks its variables
    with pytest.raises(PayloadError) as empty, runtime.sessions() as session:
        start_sequence(session, org_id=org, name="n", recipient_email="a@example.com", steps=[])
    assert empty.value.errors[0]["loc"] == ("steps",)
    assert db.execute("SELECT count(*) FROM email_sequences").fetchone() == (0,)


def test_an_address_that_unsubscribed_never_starts(runtime, db) -> None:
    org, to = uuid.uuid4(), unique("gone")
    db.execute(
        "INSERT INTO email_suppressions (org_id, email, reason) VALUES (%s, %s, 'UNSUBSCRIBED')",
        (org, to.lower()),
    )
    with runtime.sessions() as session, session.begin():
        started = start_sequence(session, org_id=org, name="n", recipient_email=to,
                                 steps=STEPS, variables=VARS)  # fmt: skip
    assert (started.status, started.stop_reason) == ("STOPPED", "UNSUBSCRIBED")
    assert _step(db, started.sequence_id, 0)[1] == "CANCELED"
