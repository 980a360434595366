"""email-seq:run_due and sequences: due rows enqueued once, steps relative to the actual send,
unsubscribe and bounce stop a sequence. The clock is a parameter: nothing sleeps for a step."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

from shared.contracts.base import SYSTEM_ORG
from shared.jobs import catalog
from tests.support.queues import queued
from tests.workers.email.helpers import row, schedule, unique, wait_row, wait_run
from workers.email import sequences
from workers.email.due import run_due

STEPS = [sequences.Step("welcome", 0), sequences.Step("quote-reminder", 3_600)]
VARS = {
    "NAME": "Ada",
    "QUOTE_REF": "Q-7",
    "QUOTE_URL": "https://example.com/q/7",
    "EXPIRES_ON": "2026-12-31",
}


def _start(db, to: str, now: datetime) -> uuid.UUID:  # type: ignore[no-untyped-def]
    return sequences.start(
        db,
        org_id=uuid.uuid4(),
        name="onboarding",
        recipient_email=to,
        steps=STEPS,
        now=now,
        variables=VARS,
    )


def _step(db, sequence_id: uuid.UUID, step: int) -> dict:  # type: ignore[no-untyped-def,type-arg]
    found = db.execute(
        "SELECT id FROM scheduled_emails WHERE sequence_id = %s AND sequence_step = %s",
        (sequence_id, step),
    ).fetchone()
    return row(db, found[0]) if found else {}


def _sequence(db, sequence_id: uuid.UUID) -> tuple[str, str | None]:  # type: ignore[no-untyped-def]
    return db.execute(
        "SELECT status, stop_reason FROM email_sequences WHERE id = %s", (sequence_id,)
    ).fetchone()


def _run_due(worker, now: datetime):  # type: ignore[no-untyped-def]
    return run_due(worker.mailer.pool.connection, worker.mailer.send_job, now=now, batch=50)


def test_the_next_step_is_due_relative_to_the_actual_send_of_the_previous(email_worker, db) -> None:
    started = datetime.now(UTC) - timedelta(
        hours=5
    )  # step 0 has been due for hours (worker was down)
    seq = _start(db, unique("onboard"), started)
    assert _run_due(email_worker, datetime.now(UTC)).enqueued == 1

    first = wait_row(db, _step(db, seq, 0)["id"], "SENT")
    second = _step(db, seq, 1)
    assert second["status"] == "SCHEDULED" and second["template_key"] == "quote-reminder"
    assert second["send_at"] == first["sent_at"] + timedelta(seconds=3_600)  # not started + 1 h
    assert _run_due(email_worker, first["sent_at"] + timedelta(seconds=3_599)).enqueued == 0

    assert _run_due(email_worker, first["sent_at"] + timedelta(seconds=3_600)).enqueued == 1
    wait_row(db, second["id"], "SENT")
    assert _sequence(db, seq) == ("COMPLETED", None)


def test_an_unsubscribe_stops_the_sequence_and_cancels_its_pending_step(email_worker, db) -> None:
    to = unique("leaver")
    seq = _start(db, to, datetime.now(UTC))
    _run_due(email_worker, datetime.now(UTC))
    first = wait_row(db, _step(db, seq, 0)["id"], "SENT")
    org = first["org_id"]

    assert sequences.unsubscribe(db, org, to.upper(), now=datetime.now(UTC)) == 1

    assert _sequence(db, seq) == ("STOPPED", "UNSUBSCRIBED")
    assert _step(db, seq, 1)["status"] == "CANCELED"
    later = first["sent_at"] + timedelta(days=2)
    assert _run_due(email_worker, later).enqueued == 0
    # An address that unsubscribed never starts a new sequence either.
    again = sequences.start(
        db, org_id=org, name="winback", recipient_email=to, steps=STEPS, now=later, variables=VARS
    )
    assert _sequence(db, again) == ("STOPPED", "UNSUBSCRIBED")


def test_a_bounce_stops_the_sequence(email_worker, db) -> None:
    seq = _start(db, unique("reject-bounce"), datetime.now(UTC))
    _run_due(email_worker, datetime.now(UTC))

    failed = wait_row(db, _step(db, seq, 0)["id"], "FAILED")
    assert failed["error_code"] == "SMTP_550"
    assert _sequence(db, seq) == ("STOPPED", "BOUNCED")
    assert _step(db, seq, 1) == {}


def test_a_queued_step_of_a_stopped_sequence_is_canceled_not_sent(
    runtime, email_worker, db
) -> None:
    to = unique("quick")
    seq = _start(db, to, datetime.now(UTC))
    step0 = _step(db, seq, 0)
    sequences.unsubscribe(db, step0["org_id"], to, now=datetime.now(UTC))
    db.execute(
        "UPDATE scheduled_emails SET status = 'QUEUED' WHERE id = %s", (step0["id"],)
    )  # enqueued before

    email = schedule(db, to)  # a transactional email to the same address is still sent
    catalog.EMAIL_SEND.send({**row_payload(db, step0["id"])})
    catalog.EMAIL_SEND.send(email.payload())

    assert wait_row(db, step0["id"], "CANCELED")["error_code"] == "SEQUENCE_STOPPED"
    wait_row(db, email.id, "SENT")


def row_payload(db, email_id: uuid.UUID) -> dict:  # type: ignore[no-untyped-def,type-arg]
    r = row(db, email_id)
    return {
        "org_id": str(r["org_id"]), "entity_id": str(r["id"]), "template_key": r["template_key"],
        "recipient_email": r["recipient_email"], "variables": r["variables"], "lang": r["lang"],
    }  # fmt: skip


def test_two_run_due_passes_at_once_enqueue_each_due_email_once(runtime, db) -> None:
    now = datetime.now(UTC)
    emails = [
        schedule(db, unique(f"due{i}"), send_at=now - timedelta(minutes=1)) for i in range(30)
    ]
    future = schedule(db, unique("later"), send_at=now + timedelta(hours=1))
    send = runtime.sender.send
    results = []

    def one_pass() -> None:
        results.append(
            run_due(
                runtime.pool.connection, lambda p: send(catalog.EMAIL_SEND, p), now=now, batch=7
            )
        )

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    assert sum(r.enqueued for r in results) == 30 and sum(r.duplicates for r in results) == 0
    ns = runtime.settings.broker_namespace
    assert queued(runtime.broker.client, ns, "email") == 30
    assert {row(db, e.id)["status"] for e in emails} == {"QUEUED"}
    assert row(db, future.id)["status"] == "SCHEDULED"
    # A pass that died after sending but before committing leaves SCHEDULED rows: sent again, deduplicated.
    db.execute("UPDATE scheduled_emails SET status = 'SCHEDULED' WHERE id = %s", (emails[0].id,))
    again = run_due(runtime.pool.connection, lambda p: send(catalog.EMAIL_SEND, p), now=now)
    assert (again.enqueued, again.duplicates) == (0, 1)
    assert queued(runtime.broker.client, ns, "email") == 30


def test_a_double_trigger_of_the_same_minute_is_one_run_due_job(email_worker, db) -> None:
    email = schedule(db, unique("trigger"), send_at=datetime.now(UTC) - timedelta(seconds=1))
    payload = {"org_id": str(SYSTEM_ORG), "slot": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")}

    first = catalog.EMAIL_SEQ_RUN_DUE.send(payload)
    second = catalog.EMAIL_SEQ_RUN_DUE.send(payload)

    assert second.duplicate and second.job_id == first.job_id
    wait_row(db, email.id, "SENT")
    assert wait_run(email, "COMPLETED").attempt == 1
