"""Messages that bypassed `.send` (another producer, a hand-written LPUSH) die at once, visibly,
and the worker carries on."""

from __future__ import annotations

import uuid
from typing import Any

from shared import dlq
from tests.support.jobs import raw_message
from tests.support.wait import wait_for, wait_run


def test_invalid_raw_messages_are_dead_at_once_and_the_worker_keeps_running(fleet) -> None:
    org = uuid.uuid4()
    unknown_version = raw_message("test:echo", {"v": 9, "org_id": str(org)})
    not_an_object = raw_message("test:echo", "hello")
    missing_field = raw_message(
        "test:echo", {"v": 2, "org_id": str(org), "entity_id": str(uuid.uuid4())}
    )
    for message in (unknown_version, not_an_object, missing_field):
        fleet.broker.enqueue(message)

    def dead() -> dict[str, Any]:
        found = {run.message_id: run for run in dlq.list_dead(queue="testq")}
        return found if len(found) == 3 else {}

    found = wait_for(dead, what="three DEAD runs")
    for message in (unknown_version, not_an_object, missing_field):
        run = found[message.message_id]
        assert (run.status, run.error_code, run.attempt) == ("DEAD", "INVALID_PAYLOAD", 1)
        assert run.job_id == f"raw:test:echo:{message.message_id}"
        assert run.error and "test:echo" in run.error
    assert "unknown version 9" in (found[unknown_version.message_id].error or "")
    assert "must be an object" in (found[not_an_object.message_id].error or "")
    assert "message" in (found[missing_field.message_id].error or "")
    assert found[unknown_version.message_id].org_id == org  # the tenant is kept when readable

    sent = fleet.jobs["echo"].send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "after"}
    )
    run = wait_run(sent.job_id, "COMPLETED", org_id=org)
    assert run.result == {"echo": "after", "attempt": 1}


def test_a_message_for_an_unknown_job_is_dead_with_unknown_job(fleet) -> None:
    message = raw_message("test:no-such-job", {"v": 1})
    fleet.broker.enqueue(message)

    run = wait_for(lambda: dlq.list_dead(queue="testq"), what="a DEAD run")[0]
    assert (run.job_name, run.error_code, run.message_id) == (
        "test:no-such-job",
        "UNKNOWN_JOB",
        message.message_id,
    )

    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "after"}
    )
    wait_run(sent.job_id, "COMPLETED", org_id=org)
