"""The test kit a product uses in its own tests: sends captured with production contracts and ids."""

from __future__ import annotations

import uuid
from typing import Any, Literal

import pytest

from shared import outbox
from shared.contracts.base import Contract, Payload
from shared.errors import PayloadError
from shared.jobs import catalog
from shared.jobs.context import JobContext, request_context
from shared.jobs.spec import JobSpec
from shared.testing import JobCapture, NotAvailableInCapture
from tests.support.jobs import ECHO, SLEEP

pytest_plugins = ["shared.testing.plugin"]


def echo(org: uuid.UUID, message: str) -> dict[str, Any]:
    return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": message}


def test_a_send_is_captured_with_the_production_job_id(jobfleet: JobCapture) -> None:
    payload = echo(uuid.uuid4(), "hi")

    with request_context("req-1"):
        result = ECHO.send(payload)

    job = jobfleet.assert_sent(ECHO, message="hi")
    assert result.job_id == job.job_id == ECHO.job_id(ECHO.build(payload))
    assert (job.request_id, job.via, result.duplicate) == ("req-1", "send", False)
    jobfleet.assert_not_sent(ECHO, message="other")
    jobfleet.assert_not_sent(SLEEP)


def test_old_payload_versions_are_upgraded_as_a_worker_would(jobfleet: JobCapture) -> None:
    ECHO.send({"v": 1, "org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()), "text": "old"})

    (job,) = jobfleet.sent_jobs(ECHO)
    assert (job.payload.v, job.payload.message) == (2, "old")


def test_an_invalid_payload_raises_as_in_production_and_nothing_is_captured(
    jobfleet: JobCapture,
) -> None:
    with pytest.raises(PayloadError, match="message"):
        ECHO.send({"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4())})
    assert jobfleet.sent_jobs() == []


def test_the_same_job_twice_is_a_duplicate(jobfleet: JobCapture) -> None:
    payload = echo(uuid.uuid4(), "once")
    first, second = ECHO.send(payload), ECHO.send(payload)

    assert (first.duplicate, second.duplicate) == (False, True)
    assert len(jobfleet.sent_jobs(ECHO)) == 1


def test_assert_sent_says_what_was_sent_instead(jobfleet: JobCapture) -> None:
    ECHO.send(echo(uuid.uuid4(), "actual"))

    with pytest.raises(
        AssertionError,
        match=r"(?s)expected one test:echo job with message='wanted', found 0.*message='actual'",
    ):
        jobfleet.assert_sent(ECHO, message="wanted")


def test_a_staged_job_counts_as_sent_only_once_its_transaction_commits(
    jobfleet: JobCapture,
) -> None:
    session = jobfleet.session()
    with session.begin():
        event = outbox.enqueue(session, ECHO, echo(uuid.uuid4(), "staged"))  # type: ignore[arg-type]
        jobfleet.assert_not_sent(ECHO)  # a worker would not see it before the commit
        assert [job.job_id for job in jobfleet.staged_jobs(ECHO)] == [event.job_id]

    job = jobfleet.assert_sent(ECHO, message="staged")
    assert (job.via, job.job_id) == ("outbox", event.job_id)
    assert jobfleet.staged_jobs() == []


def test_a_rolled_back_transaction_sends_nothing(jobfleet: JobCapture) -> None:
    session = jobfleet.session()
    with pytest.raises(RuntimeError), session.begin():
        outbox.enqueue(session, ECHO, echo(uuid.uuid4(), "never"))  # type: ignore[arg-type]
        raise RuntimeError("the product's write failed")

    jobfleet.assert_not_sent(ECHO)
    assert jobfleet.staged_jobs() == []


def test_a_session_closed_without_commit_sends_nothing(jobfleet: JobCapture) -> None:
    with jobfleet.session() as session:
        outbox.enqueue(session, ECHO, echo(uuid.uuid4(), "never"))  # type: ignore[arg-type]
    jobfleet.assert_not_sent(ECHO)


def test_a_misspelled_field_is_named_not_matched_to_nothing(jobfleet: JobCapture) -> None:
    ECHO.send(echo(uuid.uuid4(), "hello"))

    with pytest.raises(TypeError, match="no field 'mesage'"):
        jobfleet.assert_sent(ECHO, mesage="hello")
    with pytest.raises(TypeError, match="no field 'mesage'"):
        jobfleet.assert_not_sent(ECHO, mesage="hello")
    assert jobfleet.assert_sent(ECHO, message="hello").payload.message == "hello"


def test_drain_runs_handlers_inline_including_the_jobs_they_send(jobfleet: JobCapture) -> None:
    org = uuid.uuid4()
    seen: list[tuple[str, int]] = []

    def handle_echo(payload: Any, job: JobContext) -> dict[str, Any]:
        seen.append((payload.message, job.attempt))
        if payload.message == "first":
            ECHO.send(echo(org, "follow-up"))
        return {"echo": payload.message}

    ECHO.send(echo(org, "first"))
    ran = jobfleet.drain({ECHO: handle_echo})

    assert seen == [("first", 1), ("follow-up", 1)]
    assert [(job.status, job.result) for job in ran] == [
        ("COMPLETED", {"echo": "first"}),
        ("COMPLETED", {"echo": "follow-up"}),
    ]
    assert jobfleet.drain({ECHO: handle_echo}) == []  # nothing pending any more


class UnboundV1(Payload):
    v: Literal[1] = 1
    entity_id: uuid.UUID


#: A job no code of this process binds a handler to.
UNBOUND = JobSpec(Contract[UnboundV1]("test:unbound", (UnboundV1,)), queue="testq")


def test_drain_without_a_handler_says_how_to_give_one(jobfleet: JobCapture) -> None:
    UNBOUND.send({"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4())})
    with pytest.raises(LookupError, match="no handler for test:unbound"):
        jobfleet.drain()


def test_a_failing_handler_marks_its_job_dead_unless_fail_fast(jobfleet: JobCapture) -> None:
    ECHO.send(echo(uuid.uuid4(), "boom"))

    def boom(payload: Any, job: JobContext) -> None:
        raise RuntimeError("handler failed")

    (job,) = jobfleet.drain({ECHO: boom}, fail_fast=False)
    assert job.status == "DEAD" and str(job.error) == "handler failed"


def test_reaching_for_redis_or_postgres_under_capture_is_a_clear_error(
    jobfleet: JobCapture,
) -> None:
    with pytest.raises(NotAvailableInCapture, match="run store"):
        _ = jobfleet.runtime.pool
    with pytest.raises(NotAvailableInCapture, match="broker"):
        _ = jobfleet.runtime.broker


def test_a_kernel_job_spec_is_captured_too(jobfleet: JobCapture) -> None:
    org = uuid.uuid4()
    catalog.EMAIL_SEND.send(
        {
            "org_id": str(org),
            "entity_id": str(uuid.uuid4()),
            "template_key": "welcome",
            "recipient_email": "ana@example.com",
            "variables": {"NAME": "Ana"},
        }
    )
    jobfleet.assert_sent(
        catalog.EMAIL_SEND, recipient_email="ana@example.com", variables__NAME="Ana"
    )
