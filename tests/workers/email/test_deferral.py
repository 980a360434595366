"""Retry semantics of issue 16: 4xx replies and an unreachable server are retried on a schedule
reaching hours without spending attempts; 5xx is permanent; greylisted mail arrives by itself.
Against a real Postfix with postgrey and the aiosmtpd test server, the schedule shrunk to
seconds (conftest: DEFER_MIN_S, DEFER_MAX_S, OUTAGE_WINDOW_S)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from shared.config import RetryPolicy
from shared.jobs import catalog
from tests.support.wait import wait_for
from tests.workers.email.conftest import (
    EMAIL_RETRY,
    GREYLIST_DELAY_S,
    OUTAGE_WINDOW_S,
    SmtpServer,
    free_port,
)
from tests.workers.email.helpers import row, schedule, unique, wait_row, wait_run
from workers.email.deferral import DeferralPolicy

ONE_ATTEMPT = RetryPolicy(max_attempts=1, min_backoff_ms=100)


def test_greylisted_mail_is_delivered_by_itself_without_spending_attempts(
    make_email_worker, postfix, db
) -> None:
    # One attempt: a 4xx that spent it would make the email DEAD at once
    make_email_worker(postfix.port, retries={"email": ONE_ATTEMPT})
    email = schedule(db, unique("greylist"))
    catalog.EMAIL_SEND.send(email.payload())

    greylisted = wait_for(
        lambda: "Greylisted" in ((r := row(db, email.id)).get("error") or "") and r,
        what="greylisted",
    )
    assert greylisted["error_code"] == "SMTP_450" and greylisted["deferrals"] >= 1
    sent = wait_row(db, email.id, "SENT", timeout=GREYLIST_DELAY_S + 15)
    run = wait_run(email, "COMPLETED")
    assert run.attempt == 1 and sent["deferrals"] >= 1
    assert len(wait_for(lambda: postfix.delivered(sent["message_id"]))) == 1


def test_a_5xx_from_postfix_on_the_recipient_is_permanent(make_email_worker, postfix, db) -> None:
    make_email_worker(postfix.port)
    email = schedule(db, unique("reject"))
    catalog.EMAIL_SEND.send(email.payload())

    run = wait_run(email, "DEAD")
    failed = row(db, email.id)
    assert run.attempt == 1 and run.error_code == "SMTP_550"
    assert failed["status"] == "FAILED" and failed["deferrals"] == 0


def test_a_relay_down_longer_than_the_attempts_take_is_waited_for(
    make_email_worker, db, tmp_path
) -> None:
    port = free_port()
    make_email_worker(port)
    email = schedule(db, unique("outage"))
    catalog.EMAIL_SEND.send(email.payload())

    # Given more failed connections than the email policy has attempts
    deferred = wait_for(
        lambda: (r := row(db, email.id)).get("deferrals", 0) > EMAIL_RETRY.max_attempts and r,
        what="several deferrals",
    )
    assert deferred["status"] == "QUEUED" and deferred["error_code"] == "SMTP_CONNECT"
    assert wait_run(email, "QUEUED").attempt == 1
    # When the relay comes back, then the email is sent on the first attempt
    server = SmtpServer(tmp_path / "mail", port=port).start()
    try:
        sent = wait_row(db, email.id, "SENT")
        assert wait_run(email, "COMPLETED").attempt == 1
        assert len(server.messages(sent["message_id"])) == 1
    finally:
        server.stop()


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_an_outage_longer_than_the_window_fails_with_the_last_reason(make_email_worker, db) -> None:
    make_email_worker(free_port(), retries={"email": ONE_ATTEMPT})
    email = schedule(db, unique("never"))
    catalog.EMAIL_SEND.send(email.payload())

    run = wait_run(email, "DEAD", timeout=OUTAGE_WINDOW_S + 15)
    failed = row(db, email.id)
    assert run.attempt == 1 and run.error_code == "SMTP_CONNECT"
    assert "outage window" in (run.error or "") and "SMTPConnectError" in (run.error or "")
    assert failed["status"] == "FAILED" and failed["error_code"] == "SMTP_CONNECT"
    assert failed["deferrals"] >= 2
    assert failed["updated_at"] - failed["deferred_since"] >= timedelta(seconds=OUTAGE_WINDOW_S)


@pytest.mark.parametrize(
    ("deferrals", "low", "high"),
    [(1, 60, 75), (2, 120, 150), (5, 960, 1200), (6, 1800, 1800), (40, 1800, 1800)],
)
def test_the_default_schedule_doubles_from_a_minute_to_half_an_hour(
    deferrals: int, low: float, high: float
) -> None:
    delay = DeferralPolicy().delay_s(deferrals, random.Random(deferrals))
    assert low <= delay <= high


def test_the_default_schedule_keeps_trying_for_a_day() -> None:
    policy, rng = DeferralPolicy(), random.Random(7)
    start = now = datetime(2026, 11, 30, tzinfo=UTC)
    tries = 0
    while not policy.expired(start, now):
        tries += 1
        now += timedelta(seconds=policy.delay_s(tries, rng))
    assert now - start >= timedelta(hours=24) and 45 <= tries <= 55
