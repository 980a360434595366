"""No duplicate email: redelivery after a crash between the server's accept and the ack, a SENT
row redelivered, and the operator's explicit resend of an email whose outcome is unknown."""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import UTC, datetime

import pytest

from shared.errors import AlreadyDone
from shared.jobs import catalog
from shared.jobs.context import JobContext
from tests.support import env as support_env
from tests.support.procs import WorkerProcess
from tests.support.wait import wait_for
from tests.workers.email.helpers import job_id, row, schedule, unique, wait_row, wait_run
from workers.email.delivery import deliver
from workers.email.resend import resend


def _context(email, attempt: int = 1) -> JobContext:  # type: ignore[no-untyped-def]
    return JobContext(
        job_id=job_id(email), job_name="email:send", queue="email", org_id=email.org_id,
        attempt=attempt, max_attempts=3, message_id="m",
    )  # fmt: skip


@pytest.mark.slow
def test_redelivery_after_a_sigkill_between_accept_and_ack_sends_no_second_email(
    make_email_worker, smtp_server, db, tmp_path
) -> None:
    # Given a worker process whose server has stored the message but not yet answered 250
    env = {
        **os.environ,
        **support_env.test_env(),
        "SMTP_PORT": str(smtp_server.port),
        "SMTP_TIMEOUT_S": "10",
        "EMAIL_MESSAGE_ID_DOMAIN": "test.jobfleet",
        "RETRIES": json.dumps(
            {"email": {"max_attempts": 3, "min_backoff_ms": 1000, "max_backoff_ms": 3000}}
        ),
        "PYTHONUNBUFFERED": "1",
        "dramatiq_worker_timeout": "50",
    }
    argv = [
        sys.executable,
        "-m",
        "dramatiq",
        "workers.email.app",
        "--processes",
        "1",
        "--threads",
        "2",
        "--skip-logging",
    ]
    proc = WorkerProcess(argv, env=env, log_path=tmp_path / "worker.log")
    try:
        proc.wait_ready()
        email = schedule(db, unique("slow"))
        catalog.EMAIL_SEND.send(email.payload())
        sending = wait_row(db, email.id, "SENDING")
        wait_for(
            lambda: smtp_server.messages(sending["message_id"]),
            what="the server stored the message",
        )

        # When the worker dies before it records the reply and acknowledges the message
        (child,) = proc.children()
        os.kill(child, signal.SIGKILL)
        make_email_worker(smtp_server.port)  # another worker takes the redelivered message

        # Then the redelivery sends nothing and the unknown outcome is visible, not silent
        run = wait_run(email, "DEAD", timeout=30)
        assert run.error_code == "EMAIL_UNCONFIRMED" and sending["message_id"] in (run.error or "")
        unconfirmed = row(db, email.id)
        assert unconfirmed["status"] == "UNCONFIRMED" and unconfirmed["attempts"] == 1
        assert len(smtp_server.messages(sending["message_id"])) == 1
    finally:
        proc.close()


def test_a_timeout_while_data_is_in_flight_is_unconfirmed_not_resent(
    email_worker, smtp_server, db
) -> None:
    email = schedule(db, unique("slow"))
    catalog.EMAIL_SEND.send(email.payload())

    run = wait_run(email, "DEAD")
    unconfirmed = row(db, email.id)
    assert run.attempt == 1 and run.error_code == "EMAIL_UNCONFIRMED"
    assert unconfirmed["status"] == "UNCONFIRMED" and "during DATA" in unconfirmed["error"]
    assert len(smtp_server.messages(unconfirmed["message_id"])) == 1


def test_the_operator_resend_of_an_unconfirmed_email_carries_the_same_message_id(
    email_worker, smtp_server, db
) -> None:
    email = schedule(db, unique("slow"))
    catalog.EMAIL_SEND.send(email.payload())
    first = wait_run(email, "DEAD")
    message_id = row(db, email.id)["message_id"]

    replay = resend(email_worker.runtime, email.id, email.org_id, by="ops", now=datetime.now(UTC))

    assert replay.job_id == first.job_id
    wait_for(lambda: len(smtp_server.messages(message_id)) == 2, what="the resent copy")
    again = wait_run(email, "DEAD")  # the slow server times out again: unknown again, not looped
    assert again.replay_count == 1 and again.replayed_by == "ops"


def test_a_sent_row_redelivered_sends_nothing(email_worker, smtp_server, db) -> None:
    email = schedule(db, unique("once"))
    catalog.EMAIL_SEND.send(email.payload())
    sent = wait_row(db, email.id, "SENT")

    with pytest.raises(AlreadyDone, match=sent["message_id"]):
        deliver(email.payload(), _context(email, attempt=2), email_worker.mailer)
    assert len(smtp_server.messages(sent["message_id"])) == 1
    assert row(db, email.id)["attempts"] == 1
