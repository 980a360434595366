"""What a worker checks before it runs a message (issue 13): its shape (one payload argument,
no keywords) and that its `options.job_id` is the id its payload derives."""

from __future__ import annotations

import uuid
from typing import Any

import dramatiq

from shared import dlq
from shared.jobs import runs
from shared.jobs.message import build_message
from tests.support.jobs import ECHO
from tests.support.wait import wait_for, wait_run


def _echo(org: uuid.UUID, text: str) -> dict[str, Any]:
    return {"v": 2, "org_id": str(org), "entity_id": str(uuid.uuid4()), "message": text}


def _raw(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name="testq", actor_name="test:echo", args=args, kwargs=kwargs, options={}
    )


def test_wire_shape_errors_are_invalid_payload_at_once(fleet, marks) -> None:
    org = uuid.uuid4()
    payload = _echo(org, "shape")
    as_keyword = _raw((), {"payload": payload})
    two_args = _raw((payload, payload), {})
    no_args = _raw((), {})
    for message in (as_keyword, two_args, no_args):
        fleet.broker.enqueue(message)

    def dead() -> dict[str, Any]:
        found = {run.message_id: run for run in dlq.list_dead(queue="testq")}
        return found if len(found) == 3 else {}

    found = wait_for(dead, timeout=15, what="three DEAD runs")
    for message in (as_keyword, two_args, no_args):
        run = found[message.message_id]
        assert (run.error_code, run.attempt) == ("INVALID_PAYLOAD", 1), run.error
        assert "one positional payload" in (run.error or "")
    assert marks.read_text() == ""  # the handler never ran


def test_a_job_id_that_is_not_its_payloads_is_refused_and_the_real_job_untouched(
    fleet, marks
) -> None:
    org = uuid.uuid4()
    # Given job A sent normally (delayed, so its own delivery comes after the forged one)
    real = _echo(org, "the real one")
    sent = ECHO.send(real, delay_ms=1_500)
    assert fleet.runtime.sender.flush(5)
    # When a message claims A's job id but carries another payload
    other = _echo(org, "someone else's")
    forged = build_message(
        job_name="test:echo",
        queue="testq",
        payload=other,
        job_id=sent.job_id,
        org_id=org,
        entity_type="echo",
        entity_id=other["entity_id"],
        request_id=None,
    )
    fleet.broker.enqueue(forged)

    # Then it is DEAD (JOB_ID_MISMATCH, both ids in the error) under its own raw id
    raw_id = f"raw:test:echo:{forged.message_id}"
    dead = wait_run(raw_id, "DEAD", timeout=15)
    assert dead.error_code == "JOB_ID_MISMATCH"
    derived = ECHO.job_id(ECHO.build(other))
    assert sent.job_id in (dead.error or "") and derived in (dead.error or "")
    # And A's run is untouched, and A's own delivery runs A's payload
    untouched = runs.find(sent.job_id, org_id=org)
    assert untouched is not None and (untouched.status, untouched.attempt) == ("QUEUED", 0)
    done = wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=15)
    assert done.result == {"echo": "the real one", "attempt": 1}
    assert marks.read_text().splitlines() == [f"echo {sent.job_id} 1"]
